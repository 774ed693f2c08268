import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { Client } from 'pg';
import { runMigrations } from '../../src/database/migrator';
import { freePort } from '../support/app';
import { startGatewayProcess, waitUntilGone } from '../support/gateway-process';
import { connectAutoApproved } from '../support/connect';
import type { RunningSandbox } from '../support/sandbox';
import { startSandbox } from '../support/sandbox';
import { waitFor } from '../support/send';
import { untilTokensExpired } from '../support/tokens';

const OPERATOR = `rgo_stock_${'s'.repeat(30)}`;
const INSTANCES = 4;
const PER_INSTANCE = 200;
/** Access-token lifetime in the sandbox; the gateway uses a token until 90 % of it. */
const TTL_S = 20;
/** Refreshes expected while a round lasts `ms` after the first one: one per expiry met. */
const expiriesDuring = (ms: number) => 1 + Math.floor(ms / (TTL_S * 900));

interface Outcome {
  key: string;
  email: string;
  status: number;
  retryAfter: string | null;
}

/**
 * Operators' Postgres: `max_connections = 100` (the default), several gateway instances with the default connection
 * budget (DATABASE_MAX_CONNECTIONS = 12). No send may be lost to "too many clients".
 */
describe('reliability: 4 gateway processes on a stock Postgres (max_connections = 100)', () => {
  let pg: ChildProcess;
  let sandbox: RunningSandbox;
  let url: string;
  const gateways: { child: ChildProcess; base: string }[] = [];
  const adminClients: Client[] = [];

  const api = (base: string, p: string, init: RequestInit = {}) =>
    fetch(`${base}${p}`, {
      ...init,
      headers: {
        Authorization: `Bearer ${OPERATOR}`,
        'Content-Type': 'application/json',
        ...(init.headers ?? {}),
      },
    });

  async function sendOne(base: string, key: string, email: string): Promise<Outcome> {
    const body = JSON.stringify({
      rewards: [
        {
          recipient: { name: key, email },
          value: { denomination: 5, currency_code: 'USD' },
          products: ['PRODAMAZONUS'],
          custom_fields: { Department: 'Sales' },
        },
      ],
    });
    const res = await api(base, '/v1/tenants/stock/rewards', {
      method: 'POST',
      headers: { 'Idempotency-Key': key },
      body,
    });
    await res.arrayBuffer();
    return { key, email, status: res.status, retryAfter: res.headers.get('retry-after') };
  }

  /** Every instance fires PER_INSTANCE sends at once. */
  async function burst(round: string): Promise<Outcome[]> {
    const all = await Promise.all(
      gateways.map((g, i) =>
        Promise.all(
          Array.from({ length: PER_INSTANCE }, (_, j) =>
            sendOne(g.base, `${round}-${i}-${j}`, `${round}-${i}-${j}@example.com`),
          ),
        ),
      ),
    );
    return all.flat();
  }

  const query = async <T extends Record<string, unknown>>(text: string, params: unknown[] = []) => {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query<T>(text, params)).rows;
    } finally {
      await c.end();
    }
  };

  /** Every key of the round ends sent, and the sandbox holds exactly one order per recipient of it. */
  async function expectSentExactlyOnce(round: string, expected: number): Promise<void> {
    await waitFor(
      () =>
        query<{ status: string; n: number }>(
          `SELECT status, count(*)::int AS n FROM reward_dispatches WHERE idempotency_key LIKE $1 GROUP BY status`,
          [`${round}-%`],
        ),
      (rows) => rows.length === 1 && rows[0].status === 'sent' && rows[0].n === expected,
      90_000,
    );
    const perRecipient = new Map<string, number>();
    for (const order of sandbox.state.accounts.get('acc_demo')!.orders.values()) {
      for (const r of order.rewards)
        if (r.recipient.email?.startsWith(`${round}-`))
          perRecipient.set(r.recipient.email, (perRecipient.get(r.recipient.email) ?? 0) + 1);
    }
    expect(perRecipient.size).toBe(expected);
    expect([...perRecipient.values()].filter((n) => n !== 1)).toEqual([]);
  }

  const refreshes = () =>
    [...sandbox.state.grants.values()].filter((g) => !g.revoked).reduce((n, g) => n + g.refreshCount, 0);

  beforeAll(async () => {
    pg = fork(path.join(__dirname, '../support/pg-control.mjs'), [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const { port } = await new Promise<{ port: number }>((resolve) =>
      pg.once('message', (m) => resolve(m as { port: number })),
    );
    const admin = new Client({ connectionString: `postgres://postgres:rel@127.0.0.1:${port}/postgres` });
    await admin.connect();
    expect((await admin.query(`SHOW max_connections`)).rows[0].max_connections).toBe('100');
    await admin.query('CREATE DATABASE stock');
    await admin.end();
    url = `postgres://postgres:rel@127.0.0.1:${port}/stock`;
    await runMigrations(url);
    const ports = await Promise.all(Array.from({ length: INSTANCES }, () => freePort()));
    sandbox = await startSandbox(ports.map((p) => `http://127.0.0.1:${p}/oauth/callback`));
    const vaultKeys = `stock:${randomBytes(32).toString('base64')}`;
    const started = await Promise.all(
      ports.map((p) =>
        startGatewayProcess(
          {
            // Default connection budget: no DATABASE_MAX_CONNECTIONS.
            DATABASE_URL: url,
            PUBLIC_BASE_URL: `http://127.0.0.1:${p}`,
            OPERATOR_API_KEY: OPERATOR,
            VAULT_KEYS: vaultKeys,
            REWARDS_SANDBOX_BASE_URL: sandbox.baseUrl,
            REWARDS_SANDBOX_CLIENT_ID: 'test-client',
            REWARDS_SANDBOX_CLIENT_SECRET: 'test-secret-value',
            DISPATCH_RETRY_BASE_MS: '200',
            DISPATCH_RETRY_MAX_MS: '2000',
            DISPATCH_POLL_MS: '200',
            DISPATCH_LEASE_MS: '5000',
            DISPATCH_UPSTREAM_TIMEOUT_MS: '3000',
            DISPATCH_MAX_ATTEMPTS: '50',
            OPS_PROBE_INTERVAL_MS: '0',
            LOG_LEVEL: 'error',
          },
          p,
        ),
      ),
    );
    started.forEach((child, i) => gateways.push({ child, base: `http://127.0.0.1:${ports[i]}` }));
    const first = gateways[0].base;
    await api(first, '/v1/tenants', { method: 'POST', body: JSON.stringify({ id: 'stock', name: 'Stock' }) });
    // Short-lived tokens, so a round starts on an expired one.
    sandbox.state.settings.accessTokenTtlSeconds = TTL_S;
    sandbox.state.settings.autoApprove = true;
    const session = (await (
      await api(first, '/v1/tenants/stock/connect-sessions', { method: 'POST', body: '{}' })
    ).json()) as { connect_url: string };
    const done = await connectAutoApproved(`${session.connect_url}/authorize`);
    expect(done.status).toBe(200); // the "connected" page (no return_url)
  }, 180_000);

  afterAll(async () => {
    for (const c of adminClients) await c.end().catch(() => undefined);
    for (const g of gateways) {
      g.child.kill('SIGTERM');
      await waitUntilGone(g.child);
    }
    await sandbox?.close();
    pg?.send('exit');
  });

  it('sends 4 × 200 concurrent rewards on an expired token exactly once: no 5xx, one refresh — then again under 30 % upstream 503s', async () => {
    await untilTokensExpired(url, 500); // the grant's access token has expired
    const before = refreshes();
    let started = Date.now();
    const first = await burst('clean');
    expect(first.filter((o) => o.status >= 500)).toEqual([]);
    expect(first.filter((o) => o.status !== 201 && o.status !== 202)).toEqual([]);
    await expectSentExactlyOnce('clean', INSTANCES * PER_INSTANCE);
    const cleanMs = Date.now() - started;
    // One refresh for 800 callers on 4 instances (one more only if the round outlived the new token).
    expect(refreshes() - before).toBeGreaterThanOrEqual(1);
    expect(refreshes() - before).toBeLessThanOrEqual(expiriesDuring(cleanMs));
    if (cleanMs < TTL_S * 900) expect(refreshes() - before).toBe(1);
    const used = await query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'rewards-gateway:%'`,
    );
    expect(used[0].n).toBeLessThanOrEqual(INSTANCES * 12);

    await untilTokensExpired(url, 500); // expired again
    sandbox.faults.rules.push({ route: 'orders', status: 503, probability: 0.3 });
    const middle = refreshes();
    started = Date.now();
    const faulty = await burst('faulty');
    expect(faulty.filter((o) => o.status >= 500)).toEqual([]);
    expect(faulty.filter((o) => o.status === 202).length).toBeGreaterThan(100); // the faults were felt
    sandbox.faults.clear();
    await expectSentExactlyOnce('faulty', INSTANCES * PER_INSTANCE);
    // One refresh per expiry: the retries of a long round may outlive the token (one more each time).
    expect(refreshes() - middle).toBeGreaterThanOrEqual(1);
    expect(refreshes() - middle).toBeLessThanOrEqual(expiriesDuring(Date.now() - started));
    expect([...sandbox.state.grants.values()].every((g) => !g.revoked)).toBe(true);
  }, 300_000);

  it('rides out a Postgres whose connections are all taken for 5 s: sends wait or answer 503 with Retry-After, none lost', async () => {
    // The gateways lose their connections (as in a failover), and another client takes every slot the server has.
    const killer = new Client({ connectionString: url });
    await killer.connect();
    adminClients.push(killer);
    await killer.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'rewards-gateway:%'`,
    );
    for (let i = 0; i < 100; i++) {
      const c = new Client({ connectionString: url });
      try {
        await c.connect();
        adminClients.push(c);
      } catch (error) {
        expect((error as { code?: string }).code ?? (error as Error).message).toMatch(
          /53300|too many clients/,
        );
        break;
      }
    }
    const release = setTimeout(() => {
      for (const c of adminClients.splice(0)) void c.end();
    }, 5_000);
    expect(adminClients.length).toBeGreaterThan(50); // the server really is full
    const started = Date.now();
    const outcomes = await Promise.all(
      gateways.flatMap((g, i) =>
        Array.from({ length: 25 }, (_, j) => sendOne(g.base, `full-${i}-${j}`, `full-${i}-${j}@example.com`)),
      ),
    );
    const tookMs = Date.now() - started;
    clearTimeout(release);
    // The outage was felt: the sends waited for the server to take connections again, or some answered 503.
    expect(tookMs >= 4_000 || outcomes.some((o) => o.status === 503)).toBe(true);
    for (const c of adminClients.splice(0)) await c.end();
    expect(outcomes.filter((o) => ![201, 202, 503].includes(o.status))).toEqual([]);
    expect(outcomes.filter((o) => o.status === 503 && !o.retryAfter)).toEqual([]);
    // Clients retry what answered 503 with the same key: the gateway recovered on its own.
    for (const o of outcomes.filter((x) => x.status === 503)) {
      const again = await waitFor(
        () => sendOne(gateways[0].base, o.key, o.email),
        (r) => r.status === 201 || r.status === 202,
        30_000,
      );
      expect([201, 202]).toContain(again.status);
    }
    await expectSentExactlyOnce('full', 100);
  }, 120_000);
});
