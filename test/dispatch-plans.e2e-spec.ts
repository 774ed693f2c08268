import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DISPATCH_SQL, DispatchStore } from '../src/reward-dispatch/dispatch.store';
import type { DispatchRow } from '../src/reward-dispatch/dispatch.view';
import { dispatchCompleted, rewardSent } from '../src/tenant-webhooks/webhook-events';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';

// pg's own serialisation of a parameter (arrays, dates, JSON): the EXPLAINs below bind what the store bound.
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (v: unknown) => string | null };

type StatementName = keyof typeof DISPATCH_SQL;

/**
 * History seeded by SQL, never analyzed: 100,000 dispatches over 50 tenants (1 in 200 a batch of 20 rewards; 1 % each
 * queued, held, pending approval, failed, partially failed; the rest sent), 109,500 rewards (a tenth of the sent ones
 * still awaiting their delivery state), and 500 webhook endpoints (each tenant at its limit of 10). Open work is due
 * later, so the gateway's own workers leave it alone.
 */
const SEED = [
  `INSERT INTO tenants (id, name) SELECT 'hist-' || n, 'History ' || n FROM generate_series(1, 50) n`,
  `INSERT INTO connections (id, tenant_id, environment, status, scopes)
   SELECT md5('c' || n)::uuid, 'hist-' || n, 'sandbox', 'active', '{default}' FROM generate_series(1, 50) n`,
  `INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, order_shape, idempotency_key, request_hash, request,
                                  upstream_payload, status, attempts, next_attempt_at, lease_until, response_status, reward_count,
                                  priority, created_at, updated_at, sent_at)
   SELECT md5('d' || g)::uuid, 'hist-' || (1 + g % 50), md5('c' || (1 + g % 50))::uuid, 'sandbox', 'single', 'key-' || g,
          repeat('0', 64), '{"external_reference": "ref", "funding_source_id": "BALANCE", "custom_fields": [[]]}',
          '{"payment": {"funding_source_id": "BALANCE"}}', s.status, 1,
          CASE WHEN s.status = 'queued' THEN now() + interval '1 hour' END,
          CASE WHEN s.status = 'sending' THEN now() + interval '1 hour' END,
          CASE WHEN s.status IN ('sent', 'partially_failed') THEN 201 WHEN s.status = 'failed' THEN 422 ELSE 202 END,
          CASE WHEN g % 200 = 0 THEN 20 ELSE 1 END, CASE WHEN g % 200 = 0 THEN 1 ELSE 0 END,
          now() - (100001 - g) * interval '1 second', now() - (100001 - g) * interval '1 second',
          CASE WHEN s.status IN ('sent', 'partially_failed') THEN now() - (100001 - g) * interval '1 second' END
     FROM generate_series(1, 100000) g,
          LATERAL (SELECT CASE g % 100 WHEN 0 THEN 'queued' WHEN 1 THEN 'sending' WHEN 2 THEN 'pending_approval'
                                       WHEN 3 THEN 'failed' WHEN 4 THEN 'partially_failed' ELSE 'sent' END AS status) s`,
  `INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload, attempts, upstream_order_id,
                                 upstream_reward_id, upstream_order_status, delivery_method, delivery_status, delivery_state,
                                 last_error, next_check_at, sent_at, updated_at, delivery_check_at)
   SELECT d.id, p, d.id || '-r' || p, s.status,
          '{"value": {"denomination": 5, "currency_code": "USD"}, "delivery": {"method": "EMAIL"},
            "recipient": {"name": "A B", "email": "a@example.com"}, "products": ["PRODAMAZONUS"]}',
          CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END,
          CASE WHEN s.status IN ('sent', 'pending_approval') THEN 'O' || d.idempotency_key || '-' || p END,
          CASE WHEN s.status = 'sent' THEN 'R' || d.idempotency_key || '-' || p END,
          CASE WHEN s.status = 'sent' THEN 'EXECUTED' WHEN s.status = 'pending_approval' THEN 'PENDING APPROVAL' END,
          'EMAIL', CASE WHEN s.status = 'sent' THEN 'DELIVERED' END,
          CASE WHEN s.status = 'sent' THEN CASE WHEN p % 10 = 5 THEN 'pending' ELSE 'delivered' END END,
          CASE WHEN s.status = 'failed' THEN '{"code": "upstream_rejected", "message": "no"}'::jsonb END,
          CASE WHEN s.status = 'pending_approval' THEN now() + interval '1 hour' END,
          CASE WHEN s.status = 'sent' THEN d.created_at END, d.updated_at,
          CASE WHEN s.status = 'sent' AND p % 10 = 5 THEN now() + interval '1 hour' END
     FROM reward_dispatches d
     CROSS JOIN LATERAL generate_series(0, d.reward_count - 1) p
     CROSS JOIN LATERAL (SELECT CASE d.status WHEN 'queued' THEN 'pending' WHEN 'sending' THEN 'sending'
                                              WHEN 'partially_failed' THEN CASE WHEN p = 0 THEN 'failed' ELSE 'sent' END
                                              ELSE d.status END AS status) s
    WHERE d.tenant_id LIKE 'hist-%'`,
  // Every tenant at its limit of webhook endpoints: the send path's write reaches the ones of its tenants by key.
  `INSERT INTO webhook_endpoints (id, tenant_id, url, events, secret_enc)
   SELECT gen_random_uuid(), 'hist-' || n, 'https://platform.example.com/hooks/' || k, '{*}', 'v1:k:x'
     FROM generate_series(1, 50) n, generate_series(1, 10) k`,
];

/**
 * Every statement of DispatchStore (DISPATCH_SQL, the very texts it runs, with the parameters it bound) must reach
 * its rows without a sequential scan of `reward_dispatches` or `dispatch_rewards` (nor, for the events the write
 * queues, of `webhook_endpoints`), whatever plan Postgres picks:
 * - planned once while the tables held a handful of rows and cached (a generic plan is kept until the tables are
 *   analyzed: with autovacuum off or behind, that is forever), EXPLAINed again after 100,000 dispatches were added;
 * - planned on that history without statistics, and again after ANALYZE;
 * - each as a generic plan (`force_generic_plan`, what a prepared statement settles on) and as a custom plan.
 */
describe('DispatchStore: every statement reaches its rows by key, whatever the plan', () => {
  let t: TestApp;
  let store: DispatchStore;
  const recorded = new Map<StatementName, unknown[]>();
  const failures: string[] = [];
  let connectionId: string;
  /** A connection the tenant disconnected: a dispatch of it that comes due is cancelled when claimed. */
  let goneConnectionId: string;

  const names = new Map<string, StatementName>(
    Object.entries(DISPATCH_SQL).map(([name, text]) => [text, name as StatementName]),
  );
  const session = async () => {
    const c = new Client({ connectionString: t.databaseUrl });
    await c.connect();
    return c;
  };
  const literals = (c: Client, values: unknown[]) =>
    values
      .map((v) => {
        const p = prepareValue(v);
        return p === null ? 'NULL' : c.escapeLiteral(p);
      })
      .join(', ');
  const prepareAll = async (c: Client) => {
    for (const name of recorded.keys()) await c.query(`PREPARE ${name} AS ${DISPATCH_SQL[name]}`);
  };
  /** EXPLAINs every recorded statement in `mode`; each plan scanning a dispatch table is a failure. */
  const check = async (c: Client, phase: string, mode: 'force_generic_plan' | 'force_custom_plan') => {
    await c.query(`SET plan_cache_mode = ${mode}`);
    for (const [name, values] of recorded) {
      const { rows } = await c.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN EXECUTE ${name}(${literals(c, values)})`,
      );
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      if (/Seq Scan on (reward_dispatches|dispatch_rewards)/.test(plan) || unkeyedEndpoints(plan))
        failures.push(`${phase}, ${mode}: ${name}\n${plan}`);
    }
  };
  /** A scan of `webhook_endpoints` (the write's events) not by key: a sequential scan, or an index read whole. */
  const unkeyedEndpoints = (plan: string) =>
    plan
      .split('\n')
      .some(
        (line, i, lines) =>
          / on webhook_endpoints\b/.test(line) && !/(Index|Recheck) Cond:/.test(lines[i + 1] ?? ''),
      );
  const neverAnalyzed = async (c: Client) =>
    (
      await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_class
          WHERE relname IN ('reward_dispatches', 'dispatch_rewards') AND reltuples < 0`,
      )
    ).rows[0].n;

  /** Runs every method of the store once on a few rows, noting each statement and the parameters it was given. */
  async function record() {
    const spy = jest.spyOn(Client.prototype, 'query');
    try {
      const tenant = 'plans';
      const payload = {
        value: { denomination: 5, currency_code: 'USD' },
        delivery: { method: 'EMAIL' },
        recipient: { name: 'Plan', email: 'plan@example.com' },
        products: ['PRODAMAZONUS'],
        custom_fields: [],
      };
      const row = (id: string, rewards: number, queued = false) => ({
        id,
        tenant_id: tenant,
        connection_id: connectionId,
        environment: 'sandbox' as const,
        order_shape: 'single' as const,
        idempotency_key: `plans-${id}`,
        request_hash: 'f'.repeat(64),
        request: { external_reference: null, funding_source_id: 'BALANCE', custom_fields: [[]] },
        upstream_payload: { payment: { funding_source_id: 'BALANCE' } },
        status: (queued ? 'queued' : 'sending') as DispatchRow['status'],
        attempts: queued ? 0 : 1,
        next_attempt_at: null,
        upstream_order_id: null,
        last_error: null,
        response_status: null,
        response_body: null,
        sent_at: null,
        reward_count: rewards,
        priority: 0 as const,
      });
      const reward = (id: string, position: number, status: 'sending' | 'pending') => ({
        position,
        external_id: `${id}-r${position}`,
        status,
        payload,
        attempts: status === 'sending' ? 1 : 0,
      });
      const [a, b, c, d, e, f] = [
        randomUUID(),
        randomUUID(),
        randomUUID(),
        randomUUID(),
        randomUUID(),
        randomUUID(),
      ];
      await store.insert(row(a, 2), [reward(a, 0, 'sending'), reward(a, 1, 'pending')]);
      await store.insert(row(b, 1, true), [reward(b, 0, 'pending')]);
      await store.insert({ ...row(f, 1, true), connection_id: goneConnectionId }, [reward(f, 0, 'pending')]);
      // Concurrent sends: their inserts and writes share statements (group commit).
      await Promise.all([
        store.insert(row(c, 1), [reward(c, 0, 'sending')]),
        store.insert(row(d, 1), [reward(d, 0, 'sending')]),
        store.insert(row(e, 1), [reward(e, 0, 'sending')]),
      ]);
      await Promise.all([c, d, e].map((id) => store.write(id, [], null)));
      // A lane marks a reward sending (lease extended), then the attempt ends: one sent, one held for approval — each
      // with the tenant event the sender builds for it.
      const now = new Date();
      const facts = { ...row(a, 2), created_at: now };
      await store.write(a, [{ position: 1, status: 'sending', bump: 1, last_error: null }], null);
      await store.write(
        a,
        [
          {
            position: 0,
            status: 'sent',
            upstream_order_id: 'ORD-A0',
            upstream_reward_id: `RWD-${a}`,
            upstream_order_status: 'EXECUTED',
            delivery_status: 'PENDING',
            last_error: null,
            sent_at: now,
            event: rewardSent(
              facts,
              {
                position: 0,
                external_id: `${a}-r0`,
                upstream_reward_id: `RWD-${a}`,
                upstream_order_id: 'ORD-A0',
                upstream_order_status: 'EXECUTED',
                delivery_method: 'EMAIL',
                sent_at: now,
              },
              now,
            ),
          },
          {
            position: 1,
            status: 'pending_approval',
            upstream_order_id: 'ORD-A1',
            upstream_order_status: 'PENDING APPROVAL',
            last_error: null,
            next_check_at: new Date(Date.now() - 1_000),
          },
        ],
        {
          status: 'partially_failed',
          response_status: 201,
          last_error: null,
          next_attempt_at: null,
          sent_at: now,
          event: dispatchCompleted(
            { ...facts, external_reference: null },
            {
              status: 'partially_failed',
              counts: { pending: 0, sending: 0, sent: 1, pending_approval: 1, failed: 0, cancelled: 0 },
              error_code: null,
            },
            now,
          ),
        },
      );
      await store.write(
        c,
        [{ position: 0, status: 'failed', last_error: { code: 'upstream_rejected', message: 'no' } }],
        null,
      );
      await store.settle(c);
      await store.settle(d, { code: 'upstream_unavailable', message: 'gave up' });
      await store.cancel(tenant, b);
      await store.discard(e);
      await store.findByKey(tenant, `plans-${a}`);
      await store.find(tenant, a);
      await store.list(tenant, undefined, 20, 0);
      await store.list(tenant, 'sent', 20, 0);
      await store.rewardsOf([a, b]);
      await store.countsOf([a, b]);
      await store.openRewards(a, -1);
      await store.claimDue(10, [connectionId], []);
      await store.recordDelivery(`RWD-${a}`, [connectionId], {
        state: 'delivered',
        status: 'DELIVERED',
        reason: null,
        eventAt: new Date(),
      });
      await store.claimDeliveryChecks(10, 60_000);
      await store.stopDeliveryCheck(a, 0);
      await store.claimApprovalCheck();
      await store.settleApproval(a, {
        position: 1,
        status: 'pending_approval',
        last_error: null,
        next_check_at: new Date(Date.now() - 1_000),
      });
      await store.settleApproval(a, {
        position: 1,
        status: 'sent',
        upstream_order_status: 'EXECUTED',
        delivery_status: 'PENDING',
        last_error: null,
        sent_at: new Date(),
      });
      // Erasure, retention and a deleted tenant's purge: last, they change or remove what the others used.
      await store.eraseRecipient(tenant, { email: 'Plan@example.com' });
      await store.eraseRecipient(tenant, { phone: '+1 555 010 0000' }, 1);
      const later = new Date(Date.now() + 60_000);
      await store.redact(later, 10);
      await store.expire(later, 10);
      await store.purgeTenant(tenant, 10);
      for (const call of spy.mock.calls) {
        const [config, values] = call as unknown as [
          string | { text: string; values?: unknown[] },
          unknown[],
        ];
        const text = typeof config === 'string' ? config : config.text;
        const name = names.get(text);
        if (name && !recorded.has(name))
          recorded.set(name, (typeof config === 'string' ? values : config.values) ?? []);
      }
    } finally {
      spy.mockRestore();
    }
  }

  beforeAll(async () => {
    t = await startTestApp({ DISPATCH_POLL_MS: '60000', DELIVERY_RECONCILE_POLL_MS: '3600000' });
    store = t.app.get(DispatchStore);
    const c = await session();
    try {
      // No statistics until this test says so (the server's autovacuum would analyze the history within a minute).
      await c.query(`ALTER TABLE reward_dispatches SET (autovacuum_enabled = false)`);
      await c.query(`ALTER TABLE dispatch_rewards SET (autovacuum_enabled = false)`);
      await c.query(`INSERT INTO tenants (id, name) VALUES ('plans', 'Plans')`);
      goneConnectionId = (
        await c.query<{ id: string }>(
          `INSERT INTO connections (tenant_id, environment, status, scopes) VALUES ('plans', 'sandbox', 'disconnected', '{default}')
           RETURNING id`,
        )
      ).rows[0].id;
      connectionId = (
        await c.query<{ id: string }>(
          `INSERT INTO connections (tenant_id, environment, status, scopes) VALUES ('plans', 'sandbox', 'active', '{default}')
           RETURNING id`,
        )
      ).rows[0].id;
    } finally {
      await c.end();
    }
    await record();
  }, 60_000);
  afterAll(() => t.close());

  it('runs every statement of the store in the checks below', () => {
    expect([...recorded.keys()].sort()).toEqual(Object.keys(DISPATCH_SQL).sort());
  });

  it('finds no sequential scan of a dispatch table in any plan: cached from small tables, on 100k rows without statistics, analyzed', async () => {
    const early = await session();
    const late = await session();
    try {
      // Generic plans made while the tables hold a few rows, as a gateway's first sends make them.
      await early.query(`SET plan_cache_mode = force_generic_plan`);
      await prepareAll(early);
      await check(early, 'planned on a few rows', 'force_generic_plan');
      for (const statement of SEED) await early.query(statement);
      expect(await neverAnalyzed(early)).toBe(2);
      // The same cached plans, now over the history.
      await check(early, 'cached from a few rows, run on 100k', 'force_generic_plan');
      await prepareAll(late);
      await check(late, '100k rows, no statistics', 'force_generic_plan');
      await check(late, '100k rows, no statistics', 'force_custom_plan');
      await late.query(`ANALYZE reward_dispatches`);
      await late.query(`ANALYZE dispatch_rewards`);
      await late.query(`ANALYZE webhook_endpoints`);
      await check(late, '100k rows, analyzed', 'force_generic_plan');
      await check(late, '100k rows, analyzed', 'force_custom_plan');
    } finally {
      await early.end();
      await late.end();
    }
    expect(failures).toEqual([]);
  });
});
