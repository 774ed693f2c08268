import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { Database } from '../src/database/database';
import {
  DispatchStore,
  type DispatchUpdate,
  type NewReward,
  type RewardUpdate,
  writeItemOf,
} from '../src/reward-dispatch/dispatch.store';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant } from './support/connect';
import { sqlOn } from './support/database';

/**
 * DispatchStore writes one interactive send with statements of its own (parameters, src/reward-dispatch/dispatch.store.ts
 * INSERT_ONE / WRITE_ONE) and everything else with the JSON forms (group commit, batches, lanes). These tests run the
 * same inserts and writes through both and compare every column they leave, so the fast forms cannot drift.
 */
describe('DispatchStore: the one-send statements write what the JSON forms write', () => {
  let t: TestApp;
  let store: DispatchStore;
  let relaxed: Pool;
  let connectionId: string;

  // The private forms, called directly so that each side is chosen for certain (not by group-commit timing).
  type InsertAll = (items: unknown[]) => Promise<({ created_at: Date; lease_until: Date | null } | null)[]>;
  type WriteAll = (
    pool: Pool,
    durable: boolean,
    items: unknown[],
  ) => Promise<{ changed: Set<number>; connectionStatus: string | null; cancelRequested: boolean }[]>;
  const insertAll = (items: unknown[]) => (store['insertAll'] as InsertAll).call(store, items);
  const writeAll = (items: unknown[]) => (store['writeAll'] as WriteAll).call(store, relaxed, false, items);

  const payload = (email: string) => ({
    value: { denomination: 5, currency_code: 'USD' },
    delivery: { method: 'EMAIL' },
    recipient: { name: 'Form', email },
    products: ['PRODAMAZONUS'],
    custom_fields: [],
  });
  const item = (id: string, rewards: NewReward[], queued = false) => ({
    id,
    tenant_id: 'forms',
    connection_id: connectionId,
    environment: 'sandbox',
    order_shape: 'single',
    idempotency_key: `forms-${id}`,
    request_hash: 'f'.repeat(64),
    request: { external_reference: 'x', funding_source_id: 'BALANCE', custom_fields: [[]] },
    upstream_payload: { payment: { funding_source_id: 'BALANCE' } },
    queued,
    priority: 0,
    rewards,
  });
  const reward = (id: string, position = 0): NewReward => ({
    position,
    external_id: `${id}-r${position}`,
    status: 'sending',
    payload: payload(`p${position}@example.com`),
    attempts: 1,
  });
  const writeItem = writeItemOf;

  /** Every column of a dispatch and its rewards, ids and keys replaced, times as offsets from its creation. */
  async function snapshot(id: string) {
    const [d] = await sqlOn(
      t.databaseUrl,
      `SELECT status, attempts, response_status, last_error, reward_count, priority, order_shape, request, upstream_payload,
              sent_at IS NOT NULL AS sent, lease_until IS NOT NULL AS leased, next_attempt_at IS NOT NULL AS due,
              round(extract(epoch FROM lease_until - created_at)) AS lease_s,
              round(extract(epoch FROM next_attempt_at - created_at)) AS due_s
         FROM reward_dispatches WHERE id = $1`,
      [id],
    );
    const rewards = await sqlOn(
      t.databaseUrl,
      `SELECT position, replace(external_id, $1::text, '') AS external_id, status, attempts, upstream_payload, upstream_order_id,
              upstream_reward_id, upstream_order_status, delivery_method, delivery_status, delivery_state, link_enc,
              last_error, sent_at IS NOT NULL AS sent, next_check_at IS NOT NULL AS check_due,
              delivery_check_at IS NOT NULL AS reconcile_due
         FROM dispatch_rewards WHERE dispatch_id = $1::uuid ORDER BY position`,
      [id],
    );
    return { ...d, rewards };
  }

  beforeAll(async () => {
    t = await startTestApp();
    await control(t, '/reset');
    await createTenant(t, 'forms');
    connectionId = await connectTenant(t, 'forms');
    store = t.app.get(DispatchStore);
    relaxed = t.app.get(Database).relaxed;
  });
  afterAll(() => t.close());

  it('inserts one send as the JSON form does (sending and queued), and refuses a taken key the same way', async () => {
    for (const queued of [false, true]) {
      const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
      const [one] = await insertAll([item(a, [reward(a)], queued)]);
      const many = await insertAll([item(b, [reward(b)], queued), item(c, [reward(c)], queued)]);
      expect(one).not.toBeNull();
      expect(many.every((m) => m !== null)).toBe(true);
      expect(one?.lease_until === null).toBe(queued);
      // The stamps as Dates, read from the database's clock (the answer shows them).
      expect(Math.abs((one?.created_at.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
      expect(many.map((m) => m?.created_at instanceof Date && !Number.isNaN(m.created_at.getTime()))).toEqual(
        [true, true],
      );
      if (!queued)
        expect((one?.lease_until?.getTime() ?? 0) - (one?.created_at.getTime() ?? 0)).toBe(
          t.config.dispatch.leaseMs,
        );
      expect(await snapshot(a)).toEqual(await snapshot(b));
      // The same key again: nothing written, null — both forms.
      const again = item(randomUUID(), [reward(a)], queued);
      again.idempotency_key = `forms-${a}`;
      expect(await insertAll([again])).toEqual([null]);
      const againMany = { ...item(randomUUID(), [reward(b)], queued), idempotency_key: `forms-${b}` };
      expect(await insertAll([againMany, item(randomUUID(), [reward(c)], queued)])).toEqual([
        null,
        expect.anything(),
      ]);
    }
  });

  const link = 'v1:enc:not-a-real-link';
  const cases: [string, RewardUpdate[], DispatchUpdate | null][] = [
    [
      'sent, the dispatch settled',
      [
        {
          position: 0,
          status: 'sent',
          upstream_order_id: 'ORD1',
          upstream_reward_id: 'RWD1',
          upstream_order_status: 'EXECUTED',
          delivery_status: 'PENDING',
          link_enc: link,
          last_error: null,
          sent_at: new Date(),
        },
      ],
      { status: 'sent', responseStatus: 201, lastError: null, nextAttemptAt: null, sentAt: new Date() },
    ],
    [
      'held for approval',
      [
        {
          position: 0,
          status: 'pending_approval',
          upstream_order_id: 'ORD2',
          upstream_order_status: 'PENDING APPROVAL',
          last_error: null,
          next_check_at: new Date(Date.now() + 60_000),
        },
      ],
      { status: 'pending_approval', responseStatus: 202, lastError: null, nextAttemptAt: null, sentAt: null },
    ],
    [
      'failed, durable error on both rows',
      [{ position: 0, status: 'failed', last_error: { code: 'upstream_rejected', message: 'no funds' } }],
      {
        status: 'failed',
        responseStatus: 422,
        lastError: { code: 'upstream_rejected', message: 'no funds' },
        nextAttemptAt: null,
        sentAt: null,
      },
    ],
    [
      'interrupted: queued again with a backoff, progress resetting attempts',
      [
        {
          position: 0,
          status: 'sending',
          last_error: { code: 'upstream_unavailable', message: 'timeout', outcome_unknown: true },
        },
      ],
      {
        status: 'queued',
        responseStatus: 202,
        lastError: { code: 'upstream_unavailable', message: 'timeout' },
        nextAttemptAt: new Date(Date.now() + 30_000),
        sentAt: null,
        resetAttempts: true,
      },
    ],
    [
      'a lane marking its reward sending (lease extended)',
      [{ position: 0, status: 'sending', bump: 1, last_error: null }],
      null,
    ],
    [
      'no reward update, the dispatch settled',
      [],
      {
        status: 'cancelled',
        responseStatus: 409,
        lastError: { code: 'x' },
        nextAttemptAt: null,
        sentAt: null,
      },
    ],
  ];

  it.each(cases)(
    'writes %s as the JSON form does, and answers the same',
    async (_name, rewards, dispatch) => {
      const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
      await insertAll([item(a, [reward(a)]), item(b, [reward(b)]), item(c, [reward(c)])]);
      const one = await writeAll([writeItem(a, rewards, dispatch)]);
      const many = await writeAll([writeItem(b, rewards, dispatch), writeItem(c, rewards, dispatch)]);
      expect(one).toEqual([many[0]]);
      // Read back only by a write that continues the attempt.
      expect(one[0].connectionStatus).toBe(dispatch ? null : 'active');
      expect(one[0].changed).toEqual(new Set(rewards.map((r) => r.position)));
      const [sa, sb] = [await snapshot(a), await snapshot(b)];
      expect(sa).toEqual(sb);
      // A settled reward is never written again (a late lane's `sending` mark changes nothing), on both forms.
      if (rewards.length && rewards.every((r) => r.status !== 'pending' && r.status !== 'sending')) {
        const late: RewardUpdate[] = [{ position: 0, status: 'sending', bump: 1, last_error: null }];
        expect(await writeAll([writeItem(a, late, null)])).toEqual(
          (await writeAll([writeItem(b, late, null), writeItem(c, late, null)])).slice(0, 1),
        );
        expect(await snapshot(a)).toEqual(sa);
      }
    },
  );

  it('writes one dispatch’s two rewards (lanes of one attempt, `= $3` by key) as the several-dispatch form does', async () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    await insertAll([item(a, [reward(a, 0), reward(a, 1)]), item(b, [reward(b, 0), reward(b, 1)])]);
    await insertAll([item(c, [reward(c)])]);
    const updates: RewardUpdate[] = [
      { position: 0, status: 'sent', upstream_order_id: 'O', last_error: null, sent_at: new Date() },
      { position: 1, status: 'sending', bump: 1, last_error: null },
    ];
    const same = await writeAll([writeItem(a, updates, null)]);
    const several = await writeAll([writeItem(b, updates, null), writeItem(c, [], null)]);
    expect(same).toEqual([several[0]]);
    expect(same[0].changed).toEqual(new Set([0, 1]));
    expect(await snapshot(a)).toEqual(await snapshot(b));
  });

  it('answers a disconnect and a cancel request through the one-send write', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await insertAll([item(a, [reward(a)]), item(b, [reward(b)])]);
    await sqlOn(t.databaseUrl, `UPDATE reward_dispatches SET cancel_requested_at = now() WHERE id = $1`, [b]);
    const lane: RewardUpdate[] = [{ position: 0, status: 'sending', bump: 1, last_error: null }];
    expect((await writeAll([writeItem(b, lane, null)]))[0].cancelRequested).toBe(true);
    expect((await writeAll([writeItem(a, lane, null)]))[0].cancelRequested).toBe(false);
  });
});
