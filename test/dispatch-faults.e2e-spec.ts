import { Client } from 'pg';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant } from './support/connect';
import { reward, send, waitFor } from './support/send';

const SENDS = 500;
const CALLERS = 10;
/**
 * The sends are spread over this many tenants (each its own connection, all to the sandbox's one account). A send that
 * failed is retried by the worker, which sends at most two interactive dispatches per connection at once (fairness
 * between accounts): with one tenant the retries of the same 500 rewards drain two at a time, with five ten at a time.
 */
const TENANTS = ['faulty', 'faulty-2', 'faulty-3', 'faulty-4', 'faulty-5'];
const TIMEOUT_MS = 300;
/** The sandbox does the work, then answers this late: after the gateway's timeout. */
const LATE_MS = 2 * TIMEOUT_MS;

describe('dispatch under upstream faults', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      DISPATCH_RETRY_BASE_MS: '100',
      // The proof is exactly-once under faults, not the backoff curve: keep the longest wait short.
      DISPATCH_RETRY_MAX_MS: '1000',
      DISPATCH_POLL_MS: '100',
      // An answer later than this is an unknown outcome (the order may exist upstream): LATE_MS below is later. Short,
      // since every such wait holds one of the worker's two sends per account; a call slowed by a loaded machine only
      // adds faults of the same kind.
      DISPATCH_UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS),
      DISPATCH_LEASE_MS: '5000',
      DISPATCH_MAX_ATTEMPTS: '40',
      LOG_LEVEL: 'error',
    });
    await control(t, '/reset');
    for (const tenant of TENANTS) {
      await createTenant(t, tenant);
      await connectTenant(t, tenant);
    }
  });
  afterAll(async () => {
    await t.close();
  });

  it('sends 500 rewards exactly once despite 30% 503s, 429s with Retry-After and answers that come too late', async () => {
    await control(t, '/faults', { route: 'orders', status: 503, probability: 0.3 });
    await control(t, '/faults', { route: 'orders', status: 429, retry_after: 1, probability: 0.1 });
    await control(t, '/faults', { route: 'orders', delay_after_work_ms: LATE_MS, probability: 0.1 });
    const statuses: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CALLERS }, async () => {
        while (next < SENDS) {
          const i = next++;
          const res = await send(t, TENANTS[i % TENANTS.length], `fault-${i}`, {
            funding_source_id: 'FSDEMOMAIN',
            rewards: [reward({ recipient: { name: `R${i}`, email: `r${i}@example.com` } })],
          });
          statuses.push(res.status);
        }
      }),
    );
    expect(statuses).toHaveLength(SENDS);
    expect(statuses.filter((s) => s !== 201 && s !== 202)).toEqual([]);
    expect(statuses.filter((s) => s === 202).length).toBeGreaterThan(SENDS * 0.3); // the faults really happened

    const db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      await waitFor(
        async () =>
          (await db.query(`SELECT status, count(*)::int AS n FROM reward_dispatches GROUP BY status`)).rows,
        (rows) => rows.length === 1 && rows[0].status === 'sent' && rows[0].n === SENDS,
        90_000,
      );
      await request(t.baseUrl).delete('/sandbox/__control/faults');
      const orders = (await request(t.baseUrl).get('/sandbox/__control/orders')).body.orders as {
        external_id: string;
      }[];
      expect(orders).toHaveLength(SENDS);
      expect(new Set(orders.map((o) => o.external_id)).size).toBe(SENDS);
      const ids = (await db.query(`SELECT id FROM reward_dispatches`)).rows.map(
        (r) => `${r.id as string}-r0`,
      );
      expect(new Set(orders.map((o) => o.external_id))).toEqual(new Set(ids));
    } finally {
      await db.end();
    }
  }, 150_000);

  it('sends every reward of 50 dispatches of 5 exactly once despite 30% 503s and answers that come after the timeout', async () => {
    await control(t, '/reset');
    for (const tenant of TENANTS) await connectTenant(t, tenant);
    await control(t, '/faults', { route: 'orders', status: 503, probability: 0.3 });
    await control(t, '/faults', { route: 'orders', delay_after_work_ms: LATE_MS, probability: 0.1 });
    const recipients: string[] = [];
    const statuses = await Promise.all(
      Array.from({ length: 50 }, async (_, d) => {
        const rewards = Array.from({ length: 5 }, (_, i) => {
          const email = `d${d}r${i}@example.com`;
          recipients.push(email);
          return reward({ recipient: { name: `D${d} R${i}`, email } });
        });
        const tenant = TENANTS[d % TENANTS.length];
        return (await send(t, tenant, `multi-${d}`, { funding_source_id: 'BALANCE', rewards })).status;
      }),
    );
    expect(statuses.filter((s) => s !== 201 && s !== 202)).toEqual([]);
    expect(statuses.filter((s) => s === 202).length).toBeGreaterThan(10); // the faults really happened
    const db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      await waitFor(
        async () =>
          (
            await db.query(
              `SELECT r.status, count(*)::int AS n FROM dispatch_rewards r JOIN reward_dispatches d ON d.id = r.dispatch_id WHERE d.idempotency_key LIKE 'multi-%' GROUP BY r.status`,
            )
          ).rows,
        (rows) => rows.length === 1 && rows[0].status === 'sent' && rows[0].n === 250,
        90_000,
      );
      await request(t.baseUrl).delete('/sandbox/__control/faults');
      const orders = (await request(t.baseUrl).get('/sandbox/__control/orders')).body.orders as {
        external_id: string;
        recipients: string[];
      }[];
      const perRecipient = new Map<string, number>();
      for (const o of orders)
        for (const r of o.recipients) perRecipient.set(r, (perRecipient.get(r) ?? 0) + 1);
      expect(perRecipient.size).toBe(250);
      expect(recipients.every((r) => perRecipient.get(r) === 1)).toBe(true);
      expect(new Set(orders.map((o) => o.external_id)).size).toBe(250);
      // A dispatch is settled after its last reward is written (its own transaction): it ends `sent`, each of them.
      const dispatches = await waitFor(
        async () =>
          (
            await db.query(
              `SELECT status, count(*)::int AS n FROM reward_dispatches WHERE idempotency_key LIKE 'multi-%' GROUP BY status`,
            )
          ).rows,
        (rows) => rows.length === 1 && rows[0].status === 'sent',
        30_000,
      );
      expect(dispatches).toEqual([{ status: 'sent', n: 50 }]);
    } finally {
      await db.end();
    }
  }, 150_000);
});
