import type { ChildProcess } from 'node:child_process';
import { demoSeed } from '../../src/sandbox/sandbox.seed';
import { freePort } from '../support/app';
import { createTestDatabase, sqlOn } from '../support/database';
import { connectToAccount, gatewayApi, startPacedGateways, stopGateways } from '../support/gateway-api';
import { type SandboxProcess, startSandboxProcess } from '../support/sandbox-process';
import { waitFor } from '../support/send';

const OPERATOR = `rgo_pacing_${'p'.repeat(30)}`;
const RPS = 10;
const BATCH = 300;
const ACCOUNTS = ['acc_a', 'acc_b', 'acc_c'] as const;

/**
 * Issue 15's proof: the sandbox enforces 10 requests in any 1-second interval per account, two gateway processes
 * share one Postgres. Tenants A and B each submit a 300-reward batch, tenant C one interactive send 2 s later.
 */
describe('per-account pacing across 2 gateway processes (sandbox at 10 requests/s per account)', () => {
  let db: { url: string; drop: () => Promise<void> };
  let sandbox: SandboxProcess;
  const gateways: { child: ChildProcess; base: string }[] = [];
  let admittedBefore: Record<string, number> = {};

  const api = gatewayApi(OPERATOR);

  const reward = (tenant: string, i: number) => ({
    recipient: { name: `${tenant} ${i}`, email: `${tenant}-${i}@example.com` },
    value: { denomination: 5, currency_code: 'USD' },
    products: ['PRODAMAZONUS'],
    custom_fields: { Department: 'Sales' },
  });

  const connect = (base: string, tenant: string, account: string) =>
    connectToAccount(api, sandbox, base, tenant, account);

  beforeAll(async () => {
    db = await createTestDatabase();
    const ports = await Promise.all([freePort(), freePort(), freePort()]);
    sandbox = await startSandboxProcess(
      ports[2],
      ports.slice(0, 2).map((p) => `http://127.0.0.1:${p}/oauth/callback`),
    );
    // Three accounts like the demo one, each with its own limit window.
    await sandbox.control('/reset', {
      accounts: ACCOUNTS.map((id, i) => ({
        ...demoSeed()[0],
        id,
        name: id,
        api_key: `sbx_pacing_${i}_${'k'.repeat(24)}`,
      })),
    });
    await sandbox.control('/settings', { auto_approve: true });
    gateways.push(
      ...(await startPacedGateways({
        databaseUrl: db.url,
        ports: ports.slice(0, 2),
        operatorKey: OPERATOR,
        sandbox,
        rps: RPS,
      })),
    );
    await connect(gateways[0].base, 'tenant-a', 'acc_a');
    await connect(gateways[1].base, 'tenant-b', 'acc_b');
    await connect(gateways[0].base, 'tenant-c', 'acc_c');
    // The limit goes on only now: connecting is not what is measured (a fresh window per account).
    await sandbox.control('/settings', { rate_limit_rps: RPS });
    const before = (await sandbox.control('/stats')).rate_limit;
    admittedBefore = Object.fromEntries(ACCOUNTS.map((a) => [a, before[a]?.admitted ?? 0]));
  }, 120_000);

  afterAll(async () => {
    await stopGateways(gateways);
    await sandbox?.close();
    await db?.drop();
  });

  it('sends 300 + 300 batch rewards and one interactive send exactly once, with no 429, near the ideal time; the interactive one goes within 1 s', async () => {
    const started = Date.now();
    const [a, b] = await Promise.all([
      api(gateways[0].base, '/v1/tenants/tenant-a/rewards', {
        method: 'POST',
        key: 'batch-a',
        body: { rewards: Array.from({ length: BATCH }, (_, i) => reward('a', i)) },
      }),
      api(gateways[1].base, '/v1/tenants/tenant-b/rewards', {
        method: 'POST',
        key: 'batch-b',
        body: { rewards: Array.from({ length: BATCH }, (_, i) => reward('b', i)) },
      }),
    ]);
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(a.body.progress).toMatchObject({ total: BATCH, settled: 0 });
    expect(a.body.progress.estimated_completion_at).toEqual(expect.any(String));

    await new Promise((r) => setTimeout(r, 2_000));
    const interactiveStart = Date.now();
    const c = await api(gateways[1].base, '/v1/tenants/tenant-c/rewards', {
      method: 'POST',
      key: 'single-c',
      body: { rewards: [reward('c', 0)] },
    });
    const interactiveMs = Date.now() - interactiveStart;
    expect(c.status).toBe(201);
    expect(c.body.status).toBe('sent');
    expect(interactiveMs).toBeLessThan(1_000);

    // Both batches finish; each within 1.2 × the ideal time at 10 per second.
    const finished: Record<string, number> = {};
    await waitFor(
      async () => {
        for (const [tenant, id] of [
          ['tenant-a', a.body.id],
          ['tenant-b', b.body.id],
        ] as const) {
          if (finished[tenant]) continue;
          const view = await api(gateways[0].base, `/v1/tenants/${tenant}/dispatches/${id}`);
          if (view.body.status === 'sent') finished[tenant] = Date.now() - started;
        }
        return Object.keys(finished).length;
      },
      (n) => n === 2,
      60_000,
    );
    const ideal = (BATCH / RPS) * 1000;
    expect(finished['tenant-a']).toBeLessThan(1.2 * ideal);
    expect(finished['tenant-b']).toBeLessThan(1.2 * ideal);

    // Exactly once: one order per reward, with the external_ids the dispatches gave them.
    for (const [account, dispatchId, count] of [
      ['acc_a', a.body.id, BATCH],
      ['acc_b', b.body.id, BATCH],
      ['acc_c', c.body.id, 1],
    ] as const) {
      const { orders } = (await sandbox.control(`/orders?account_id=${account}`)) as {
        orders: { external_id: string }[];
      };
      expect(orders).toHaveLength(count);
      expect(new Set(orders.map((o) => o.external_id)).size).toBe(count);
      expect(orders.every((o) => o.external_id.startsWith(`${dispatchId}-r`))).toBe(true);
    }
    // No 429, and never more than 10 requests in any 1-second interval, per account.
    const stats = (await sandbox.control('/stats')).rate_limit as Record<
      string,
      { admitted: number; rejected_429: number; max_in_any_1s: number }
    >;
    for (const account of ACCOUNTS) {
      expect(stats[account].rejected_429).toBe(0);
      expect(stats[account].max_in_any_1s).toBeLessThanOrEqual(RPS);
    }
    expect(stats.acc_a.admitted - admittedBefore.acc_a).toBeGreaterThanOrEqual(BATCH);
    const rows = await sqlOn(db.url, `SELECT count(*)::int AS n FROM dispatch_rewards WHERE status = 'sent'`);
    expect(rows[0].n).toBe(2 * BATCH + 1);
    console.log(
      `pacing: A ${finished['tenant-a']} ms, B ${finished['tenant-b']} ms (ideal ${ideal} ms), interactive ${interactiveMs} ms, ` +
        `max in any 1 s: ${ACCOUNTS.map((x) => stats[x].max_in_any_1s).join('/')}`,
    );
  }, 120_000);
});
