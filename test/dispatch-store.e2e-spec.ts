import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import {
  DISPATCH_SQL,
  DispatchStore,
  type NewReward,
  type RewardUpdate,
} from '../src/reward-dispatch/dispatch.store';
import type { DispatchRow } from '../src/reward-dispatch/dispatch.view';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { sqlOn } from './support/database';

/**
 * DispatchStore on its own, over real Postgres: the writes that concurrent sends share (group commit), what a write may
 * change, and the status a settle derives from the stored rewards — also when two approvals settle at once.
 */
describe('DispatchStore', () => {
  let t: TestApp;
  let store: DispatchStore;
  let connectionId: string;
  const tenant = 'store';
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);

  const row = (id: string, rewards: number) => ({
    id,
    tenant_id: tenant,
    connection_id: connectionId,
    environment: 'sandbox' as const,
    order_shape: 'single' as const,
    idempotency_key: `store-${id}`,
    request_hash: 'f'.repeat(64),
    request: { external_reference: null, funding_source_id: 'BALANCE', custom_fields: [] },
    upstream_payload: { payment: { funding_source_id: 'BALANCE' } },
    status: 'sending' as DispatchRow['status'],
    attempts: 1,
    next_attempt_at: null,
    upstream_order_id: null,
    last_error: null,
    response_status: null,
    response_body: null,
    sent_at: null,
    reward_count: rewards,
    priority: 0 as const,
  });
  const rewards = (id: string, n: number): NewReward[] =>
    Array.from({ length: n }, (_, position) => ({
      position,
      external_id: `${id}-r${position}`,
      status: position === 0 ? 'sending' : 'pending',
      payload: {
        value: { denomination: 5, currency_code: 'USD' },
        delivery: { method: 'EMAIL' },
        recipient: { name: 'Store', email: `s${position}@example.com` },
      },
      attempts: position === 0 ? 1 : 0,
    }));
  /** A dispatch being sent (held by this test), of `n` rewards: the first `sending`, the others `pending`. */
  const dispatch = async (n = 1) => {
    const id = randomUUID();
    expect(await store.insert(row(id, n), rewards(id, n))).not.toBeNull();
    return id;
  };
  const sent = (position: number): RewardUpdate => ({
    position,
    status: 'sent',
    upstream_order_id: `ORD-${position}`,
    upstream_reward_id: `RWD-${randomUUID()}`,
    upstream_order_status: 'EXECUTED',
    last_error: null,
    sent_at: new Date(),
  });
  const statusOf = async (id: string) =>
    (
      await sql(
        `SELECT status, response_status, last_error, lease_until FROM reward_dispatches WHERE id = $1`,
        [id],
      )
    )[0];
  const rewardsOf = async (id: string) =>
    (
      await sql(
        `SELECT position, status, attempts, last_error FROM dispatch_rewards WHERE dispatch_id = $1 ORDER BY position`,
        [id],
      )
    ).map((r) => ({ ...r }));

  beforeAll(async () => {
    t = await startTestApp({ DISPATCH_POLL_MS: '60000' });
    store = t.app.get(DispatchStore);
    await sql(`INSERT INTO tenants (id, name) VALUES ($1, 'Store')`, [tenant]);
    connectionId = (
      await sql(
        `INSERT INTO connections (tenant_id, environment, status, scopes) VALUES ($1, 'sandbox', 'active', '{default}')
         RETURNING id`,
        [tenant],
      )
    )[0].id;
  });
  afterAll(() => t.close());

  it('writes concurrent sends in shared statements, each answered for its own dispatch', async () => {
    const [a, b, c, d] = [await dispatch(2), await dispatch(), await dispatch(), await dispatch()];
    await sql(`UPDATE reward_dispatches SET cancel_requested_at = now() WHERE id = $1`, [c]);
    const spy = jest.spyOn(Client.prototype, 'query');
    try {
      const [wa, wb, wc, wd] = await Promise.all([
        // A lane: the first reward sent, the second marked sending (the lease extended).
        store.write(a, [sent(0), { position: 1, status: 'sending', bump: 1, last_error: null }], null),
        // The end of an attempt: settled.
        store.write(b, [sent(0)], {
          status: 'sent',
          response_status: 201,
          last_error: null,
          next_attempt_at: null,
          sent_at: new Date(),
        }),
        store.write(c, [], null),
        store.write(d, [{ position: 0, status: 'sending', last_error: null }], null),
      ]);
      const statements = spy.mock.calls.filter(
        ([config]) => (config as { text?: string })?.text === DISPATCH_SQL.write,
      ).length;
      expect(statements).toBeGreaterThanOrEqual(1);
      expect(statements).toBeLessThan(4);
      expect(wa).toEqual({ changed: new Set([0, 1]), connectionStatus: 'active', cancelRequested: false });
      expect(wb).toEqual({ changed: new Set([0]), connectionStatus: null, cancelRequested: false });
      expect(wc).toEqual({ changed: new Set(), connectionStatus: 'active', cancelRequested: true });
      expect(wd.changed).toEqual(new Set([0]));
    } finally {
      spy.mockRestore();
    }
    expect(await rewardsOf(a)).toEqual([
      { position: 0, status: 'sent', attempts: 1, last_error: null },
      { position: 1, status: 'sending', attempts: 1, last_error: null },
    ]);
    expect(await statusOf(b)).toEqual({
      status: 'sent',
      response_status: 201,
      last_error: null,
      lease_until: null,
    });
    // A lease extension leaves the dispatch held, its lease pushed out.
    expect((await statusOf(a)).lease_until.getTime()).toBeGreaterThan(Date.now());
  });

  it('never writes a settled reward again, and ends the attempt of a dispatch only while it is held', async () => {
    const a = await dispatch();
    await store.write(
      a,
      [{ position: 0, status: 'failed', last_error: { code: 'order_failed', message: 'no' } }],
      {
        status: 'failed',
        response_status: 422,
        last_error: { code: 'order_failed', message: 'no' },
        next_attempt_at: null,
        sent_at: null,
      },
    );
    // A late lane's mark and a late end of attempt change nothing.
    const late = await store.write(a, [{ position: 0, status: 'sending', bump: 1, last_error: null }], {
      status: 'sent',
      response_status: 201,
      last_error: null,
      next_attempt_at: null,
      sent_at: new Date(),
    });
    expect(late.changed).toEqual(new Set());
    expect(await rewardsOf(a)).toEqual([
      { position: 0, status: 'failed', attempts: 1, last_error: { code: 'order_failed', message: 'no' } },
    ]);
    expect((await statusOf(a)).status).toBe('failed');
  });

  it('settles a worker’s attempt from the stored rewards: status, answer, and a give-up failing what is open', async () => {
    const mixed = await dispatch(3);
    await store.write(
      mixed,
      [
        sent(0),
        { position: 1, status: 'failed', last_error: { code: 'insufficient_funds', message: 'no funds' } },
        {
          position: 2,
          status: 'pending_approval',
          upstream_order_id: 'ORD-2',
          last_error: null,
          next_check_at: new Date(Date.now() + 60_000),
        },
      ],
      null,
    );
    await store.settle(mixed);
    expect(await statusOf(mixed)).toMatchObject({
      status: 'partially_failed',
      response_status: 201,
      last_error: null,
      lease_until: null,
    });

    const gaveUp = await dispatch(2);
    await store.settle(gaveUp, {
      code: 'upstream_unavailable',
      message: 'Gave up after 10 attempts: timeout',
    });
    expect(await statusOf(gaveUp)).toMatchObject({
      status: 'failed',
      response_status: 503,
      last_error: {
        code: 'upstream_unavailable',
        message: 'None of the 2 rewards was sent; see each reward.',
      },
    });
    expect(await rewardsOf(gaveUp)).toEqual([
      {
        position: 0,
        status: 'failed',
        attempts: 1,
        last_error: {
          code: 'upstream_unavailable',
          message: 'Gave up after 10 attempts: timeout',
          outcome_unknown: true,
        },
      },
      {
        position: 1,
        status: 'failed',
        attempts: 0,
        last_error: {
          code: 'upstream_unavailable',
          message: 'Gave up after 10 attempts: timeout',
          outcome_unknown: false,
        },
      },
    ]);

    // Open rewards left (none should be): queued again, due now.
    const open = await dispatch(2);
    await store.settle(open);
    expect((await statusOf(open)).status).toBe('queued');
  });

  it('derives the status once when two rewards held for approval are settled at the same moment', async () => {
    const held = async () => {
      const id = await dispatch(2);
      await store.write(
        id,
        [0, 1].map((position) => ({
          position,
          status: 'pending_approval' as const,
          upstream_order_id: `ORD-${position}`,
          last_error: null,
          next_check_at: new Date(),
        })),
        {
          status: 'pending_approval',
          response_status: 202,
          last_error: null,
          next_attempt_at: null,
          sent_at: null,
        },
      );
      return id;
    };
    const ids = await Promise.all(Array.from({ length: 8 }, held));
    // Two checkers settle the two rewards of each dispatch at once (separate connections, separate transactions).
    await Promise.all(
      ids.flatMap((id) => [0, 1].map((position) => store.settleApproval(id, { ...sent(position) }))),
    );
    for (const id of ids) expect((await statusOf(id)).status).toBe('sent');
  });
});
