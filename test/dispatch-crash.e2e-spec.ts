import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { freePort } from './support/app';
import { createTestDatabase } from './support/database';
import { startGatewayProcess, waitUntilGone } from './support/gateway-process';
import { createConnectedTenant } from './support/connect';
import type { RunningSandbox } from './support/sandbox';
import { startSandbox } from './support/sandbox';
import { waitFor } from './support/send';

const OPERATOR = `rgo_crash_${'k'.repeat(30)}`;
const BURST = 300;

describe('a gateway killed with SIGKILL during a burst of sends', () => {
  let sandbox: RunningSandbox;
  let db: { url: string; drop: () => Promise<void> };
  let gateway: ChildProcess | null = null;
  let env: Record<string, string>;
  let base: string;
  let port: number;
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: {
        Authorization: `Bearer ${OPERATOR}`,
        'Content-Type': 'application/json',
        ...(init.headers ?? {}),
      },
    });

  beforeAll(async () => {
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    sandbox = await startSandbox([`${base}/oauth/callback`]);
    db = await createTestDatabase();
    env = {
      DATABASE_URL: db.url,
      PUBLIC_BASE_URL: base,
      OPERATOR_API_KEY: OPERATOR,
      VAULT_KEYS: `crash:${randomBytes(32).toString('base64')}`,
      REWARDS_SANDBOX_BASE_URL: sandbox.baseUrl,
      REWARDS_SANDBOX_CLIENT_ID: 'test-client',
      REWARDS_SANDBOX_CLIENT_SECRET: 'test-secret-value',
      DISPATCH_LEASE_MS: '3000',
      DISPATCH_UPSTREAM_TIMEOUT_MS: '2000',
      DISPATCH_RETRY_BASE_MS: '100',
      DISPATCH_POLL_MS: '200',
      LOG_LEVEL: 'error',
    };
    gateway = await startGatewayProcess(env, port);
    // Connect through the real flow: gateway → sandbox (auto-approve) → callback.
    sandbox.state.settings.autoApprove = true;
    await createConnectedTenant(api, 'crashy');
  }, 120_000);

  afterAll(async () => {
    if (gateway && gateway.exitCode === null) {
      gateway.kill('SIGTERM');
      await waitUntilGone(gateway);
    }
    await sandbox.close();
    await db.drop();
  });

  it('loses no accepted dispatch and sends none twice', async () => {
    sandbox.faults.rules.push({ route: 'orders', latency_ms: 40 });
    const sendOne = async (i: number) => {
      try {
        const res = await api('/v1/tenants/crashy/rewards', {
          method: 'POST',
          headers: { 'Idempotency-Key': `burst-${i}` },
          body: JSON.stringify({
            rewards: [
              {
                recipient: { name: `R${i}`, email: `r${i}@example.com` },
                value: { denomination: 10, currency_code: 'USD' },
                products: ['PRODAMAZONUS'],
                custom_fields: { Department: 'Sales' },
              },
            ],
          }),
        });
        return { i, status: res.status, body: (await res.json()) as { id?: string } };
      } catch {
        return { i, status: 0, body: {} }; // the process died under this request: outcome unknown to the client
      }
    };
    // 20 callers send continuously; the process is killed in the middle of it.
    const results: Awaited<ReturnType<typeof sendOne>>[] = [];
    let next = 0;
    let killed = false;
    const burst = Promise.all(
      Array.from({ length: 20 }, async () => {
        while (!killed && next < BURST) results.push(await sendOne(next++));
      }),
    );
    await waitFor(
      async () => results.filter((r) => r.status === 201).length,
      (n) => n >= 40,
      30_000,
    );
    gateway?.kill('SIGKILL');
    killed = true;
    await burst;
    const total = results.length;
    await waitUntilGone(gateway as ChildProcess);
    const accepted = results.filter((r) => r.status === 201 || r.status === 202);
    const unknown = results.filter((r) => r.status === 0);
    expect(accepted.length).toBeGreaterThan(0);
    expect(unknown.length).toBeGreaterThan(0); // the kill really hit requests in flight

    gateway = await startGatewayProcess(env, port);
    // Clients retry what they could not learn the outcome of, with the same key. A dispatch the dead process held
    // answers 409 in_progress until its lease expires and a worker sends it; then the outcome is replayed.
    for (const r of unknown) {
      const retried = await waitFor(
        () => sendOne(r.i),
        (res) => res.status !== 409,
        20_000,
      );
      expect([201, 202]).toContain(retried.status);
    }

    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      await waitFor(
        async () =>
          (await client.query(`SELECT status, count(*)::int AS n FROM reward_dispatches GROUP BY status`))
            .rows,
        (rows) => rows.length === 1 && rows[0].status === 'sent' && rows[0].n === total,
        60_000,
      );
      const orders = [...sandbox.state.accounts.get('acc_demo')!.orders.values()];
      const externalIds = orders.map((o) => o.external_id);
      expect(new Set(externalIds).size).toBe(externalIds.length); // nothing sent twice
      expect(orders).toHaveLength(total);
      for (const r of accepted) expect(externalIds).toContain(`${r.body.id}-r0`); // every accepted dispatch went out
    } finally {
      await client.end();
    }
  }, 180_000);

  it('sends every reward of a 50-reward batch exactly once when the gateway is killed in the middle of it', async () => {
    sandbox.faults.clear();
    // Slow orders (8 of a dispatch go at once), so the kill lands in the middle of the batch.
    sandbox.faults.rules.push({ route: 'orders', latency_ms: 300 });
    const recipients = Array.from({ length: 50 }, (_, i) => `big${i}@example.com`);
    const body = JSON.stringify({
      rewards: recipients.map((email, i) => ({
        recipient: { name: `Big ${i}`, email },
        value: { denomination: 5, currency_code: 'USD' },
        products: ['PRODAMAZONUS'],
        custom_fields: { Department: 'Sales' },
      })),
    });
    const sendBig = () =>
      api('/v1/tenants/crashy/rewards', { method: 'POST', headers: { 'Idempotency-Key': 'big-batch' }, body })
        .then(async (res) => ({ status: res.status, body: (await res.json()) as Record<string, any> })) // eslint-disable-line @typescript-eslint/no-explicit-any
        .catch(() => ({ status: 0, body: {} as Record<string, any> })); // eslint-disable-line @typescript-eslint/no-explicit-any
    const ordersFor = () =>
      [...sandbox.state.accounts.get('acc_demo')!.orders.values()].filter((o) =>
        o.rewards.some((r) => r.recipient.email?.startsWith('big')),
      );
    const inFlight = sendBig();
    await waitFor(
      async () => ordersFor().length,
      (n) => n >= 15,
      30_000,
    );
    gateway?.kill('SIGKILL');
    expect((await inFlight).status).toBe(202); // a batch (more than 10 rewards) is answered once stored
    await waitUntilGone(gateway as ChildProcess);
    const before = ordersFor().length;
    expect(before).toBeGreaterThanOrEqual(15);
    expect(before).toBeLessThan(50); // killed in the middle

    gateway = await startGatewayProcess(env, port);
    // The worker takes the dispatch over once the dead process's lease expires and sends only what is not settled.
    const done = await waitFor(sendBig, (r) => r.status === 201, 60_000);
    expect(done.body).toMatchObject({ status: 'sent', counts: { sent: 50 } });
    expect(done.body.rewards.every((r: { status: string }) => r.status === 'sent')).toBe(true);
    const orders = ordersFor();
    expect(orders).toHaveLength(50);
    const perRecipient = new Map<string, number>();
    for (const o of orders)
      for (const r of o.rewards)
        perRecipient.set(
          r.recipient.email as string,
          (perRecipient.get(r.recipient.email as string) ?? 0) + 1,
        );
    expect([...perRecipient.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(perRecipient.keys())).toEqual(new Set(recipients));
    expect(new Set(orders.map((o) => o.external_id))).toEqual(
      new Set(recipients.map((_, i) => `${done.body.id}-r${i}`)),
    );
  }, 180_000);
});
