import request from 'supertest';
import { ActivityRecorder } from '../src/connection-activity/activity.recorder';
import { ActivityStore } from '../src/connection-activity/activity.store';
import { RetentionJob } from '../src/retention/retention';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import { GRANT_REFRESH, Vault } from '../src/token-vault/vault.service';
import type { TestApp } from './support/app';
import { startTestApp, startTestAppOn } from './support/app';
import { ManualClock } from './support/clock';
import { connectTenant, control, createTenant, op } from './support/connect';
import { createTestDatabase, sqlOn } from './support/database';
import { reward, send, waitFor } from './support/send';

type Row = Record<string, unknown>;

describe('connection activity', () => {
  let t: TestApp;
  let connectionId: string;
  let readerKey: string;
  const EMAIL = 'activity.recipient@example.com';
  const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const list = (query = '', headers: Record<string, string> = op) =>
    request(t.baseUrl).get(`/v1/tenants/acts/connection/activity${query}`).set(headers);

  beforeAll(async () => {
    // Pacing on (the sandbox itself does not limit): a 429 is then absorbed — the account slowed down, the order retried.
    t = await startTestApp({
      REWARDS_SANDBOX_RATE_LIMIT_RPS: '50',
      OPS_PROBE_INTERVAL_MS: '0',
      DISPATCH_APPROVAL_CHECK_MS: '200',
    });
    await control(t, '/reset');
    await createTenant(t, 'acts');
    connectionId = await connectTenant(t, 'acts');
    readerKey = (
      await request(t.baseUrl)
        .post('/v1/tenants/acts/api-keys')
        .set(op)
        .send({ name: 'reader', scopes: ['rewards:read'] })
        .expect(201)
    ).body.key as string;
  });
  afterAll(async () => {
    await t.close();
  });

  it('records each request of a send — a 429 absorbed, a 401, the refresh it starts, the order — with its dispatch, and nothing secret', async () => {
    const before = (await t.app.get(AccessTokenProvider).getAccessToken(connectionId)).token;
    // The order's first request answers 429 (absorbed), the second 401 (a refresh, then once more), the third goes through.
    await control(t, '/faults', { route: 'orders', status: 429, retry_after: 0, times: 1 });
    await control(t, '/faults', { route: 'orders', status: 401, times: 1 });
    const sent = await send(t, 'acts', 'act-1', {
      rewards: [reward({ recipient: { name: 'Ada Activity', email: EMAIL } })],
    });
    expect(sent.status).toBe(201);
    const dispatchId = sent.body.id as string;

    // Written in batches off the send path: within about a second.
    const page = await waitFor(
      async () => (await list(`?dispatch_id=${dispatchId}`, bearer(readerKey)).expect(200)).body,
      (body) => (body.activity as Row[]).length >= 4,
    );
    const rows = [...(page.activity as Row[])].reverse(); // oldest first
    expect(
      rows.map((r) => [r.operation, r.http_status, r.outcome, r.error_code, r.attempt, r.throttled_429]),
    ).toEqual([
      ['create_order', 429, 'throttled', 'upstream_rate_limited', 1, 0],
      ['create_order', 401, 'unauthorized', null, 2, 1],
      ['token_refresh', 200, 'success', null, 1, 0],
      ['create_order', 200, 'success', null, 3, 1],
    ]);
    for (const r of rows) {
      expect(r).toMatchObject({ connection_id: connectionId, dispatch_id: dispatchId, reward_position: 0 });
      expect(typeof r.latency_ms).toBe('number');
      expect(r.pacing_wait_ms as number).toBeGreaterThanOrEqual(0);
    }
    expect(Object.keys(rows[0]).sort()).toEqual(
      [
        'id',
        'at',
        'connection_id',
        'operation',
        'attempt',
        'http_status',
        'outcome',
        'error_code',
        'latency_ms',
        'pacing_wait_ms',
        'throttled_429',
        'dispatch_id',
        'reward_position',
      ].sort(),
    );

    // No token (before and after the refresh), refresh token, client secret or recipient e-mail in any stored row.
    const after = (await t.app.get(AccessTokenProvider).getAccessToken(connectionId)).token;
    expect(after).not.toBe(before);
    const [grant] = await sql(`SELECT refresh_token_enc FROM grants WHERE connection_id = $1`, [
      connectionId,
    ]);
    const refresh = t.app.get(Vault).open(GRANT_REFRESH, connectionId, grant.refresh_token_enc as string);
    const stored = (await sql(`SELECT row_to_json(a)::text AS text FROM connection_activity a`)).map(
      (r) => r.text as string,
    );
    expect(stored.length).toBeGreaterThanOrEqual(4);
    const everything = stored.join('\n') + JSON.stringify(page);
    for (const secret of [
      before,
      after,
      refresh,
      t.config.rewards.sandbox?.clientSecret as string,
      EMAIL,
      'Ada Activity',
    ])
      expect(everything).not.toContain(secret);
    expect(everything).not.toMatch(/@|Bearer|\/api\/v2|\?/);
  });

  it('lists newest first, filters by dispatch and outcome, and pages with a cursor', async () => {
    const second = await send(t, 'acts', 'act-2', { rewards: [reward(), reward()] });
    expect(second.status).toBe(201);
    const all = await waitFor(
      async () => (await list('?limit=200').expect(200)).body.activity as Row[],
      (rows) => rows.filter((r) => r.dispatch_id === second.body.id).length === 2,
    );
    // The connect's webhook registration, then the first send's four, then the second's two orders.
    expect(all.length).toBeGreaterThanOrEqual(7);
    expect(all.some((r) => r.operation === 'register_webhook' && r.dispatch_id === null)).toBe(true);
    const order = all.map((r) => `${r.at as string}|${String(r.id).padStart(20, '0')}`);
    expect(order).toEqual([...order].sort().reverse());
    expect(
      all
        .filter((r) => r.dispatch_id === second.body.id)
        .map((r) => r.reward_position)
        .sort(),
    ).toEqual([0, 1]);

    const throttled = (await list('?outcome=throttled').expect(200)).body.activity as Row[];
    expect(throttled.map((r) => r.operation)).toEqual(['create_order']);
    const successes = (await list('?outcome=success&limit=200').expect(200)).body.activity as Row[];
    expect(successes.length).toBe(all.filter((r) => r.outcome === 'success').length);
    const ofSecond = (await list(`?dispatch_id=${second.body.id}&outcome=success`).expect(200)).body;
    expect(ofSecond.activity).toHaveLength(2);
    expect(ofSecond.next_cursor).toBeNull();

    // Pages of 2, following next_cursor: the same rows, in the same order, none twice.
    const walked: Row[] = [];
    let cursor: string | null = null;
    do {
      const res = await list(`?limit=2${cursor ? `&cursor=${cursor}` : ''}`).expect(200);
      walked.push(...(res.body.activity as Row[]));
      cursor = res.body.next_cursor as string | null;
    } while (cursor);
    expect(walked.map((r) => r.id)).toEqual(all.map((r) => r.id));
  });

  it('answers 400 naming the bad query parameter, 403 without a reading scope, and shows a tenant only its own', async () => {
    const bad = async (query: string, field: string) => {
      const res = await list(query).expect(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details[0].field).toBe(field);
    };
    await bad('?dispatch_id=nope', 'dispatch_id');
    await bad('?outcome=exploded', 'outcome');
    await bad('?cursor=bm90LWEtY3Vyc29y', 'cursor');
    await bad('?limit=0', 'limit');
    await bad('?limit=500', 'limit');
    await bad('?connection_id=x', 'connection_id');

    const sender = (
      await request(t.baseUrl)
        .post('/v1/tenants/acts/api-keys')
        .set(op)
        .send({ name: 'sender', scopes: ['rewards:send'] })
        .expect(201)
    ).body.key as string;
    const refused = await list('', bearer(sender)).expect(403);
    expect(refused.body.error.code).toBe('insufficient_scope');

    await createTenant(t, 'other-acts');
    const other = await request(t.baseUrl)
      .get('/v1/tenants/other-acts/connection/activity')
      .set(op)
      .expect(200);
    expect(other.body).toEqual({ activity: [], next_cursor: null });
    await list('', bearer(readerKey)).expect(200);
    await request(t.baseUrl)
      .get('/v1/tenants/other-acts/connection/activity')
      .set(bearer(readerKey))
      .expect(404);
  });

  it('attributes the approval checks of a held order to its dispatch and reward', async () => {
    await request(t.baseUrl)
      .post('/sandbox/__control/accounts/acc_demo/approvals')
      .send({ required: true })
      .expect(200);
    try {
      const held = await send(t, 'acts', 'act-held', { rewards: [reward()] }).expect(202);
      expect(held.body.status).toBe('pending_approval');
      await request(t.baseUrl)
        .post(`/sandbox/__control/orders/${held.body.rewards[0].upstream_order_id as string}/approve`)
        .expect(200);
      const rows = await waitFor(
        async () => (await list(`?dispatch_id=${held.body.id as string}`).expect(200)).body.activity as Row[],
        (r) => r.some((x) => x.operation === 'get_order'),
      );
      expect(rows.at(-1)).toMatchObject({
        operation: 'create_order',
        outcome: 'success',
        reward_position: 0,
      });
      for (const r of rows.filter((x) => x.operation === 'get_order'))
        expect(r).toMatchObject({ http_status: 200, outcome: 'success', reward_position: 0 });
    } finally {
      await request(t.baseUrl)
        .post('/sandbox/__control/accounts/acc_demo/approvals')
        .send({ required: false })
        .expect(200);
    }
  });

  it('purges rows older than a cutoff, and a tenant’s rows, in bounded batches', async () => {
    const store = t.app.get(ActivityStore);
    const [{ n }] = await sql(`SELECT count(*)::int AS n FROM connection_activity`);
    expect(n).toBeGreaterThan(3);
    expect(await store.purgeOlderThan(new Date(Date.now() - 60_000), 1_000)).toBe(0);
    expect(await store.purgeOlderThan(new Date(Date.now() + 60_000), 2)).toBe(2);
    const [{ left }] = await sql(`SELECT count(*)::int AS left FROM connection_activity`);
    expect(left).toBe(n - 2);
    // A tenant leaving: its rows, a batch at a time; another tenant's untouched.
    expect(await store.purgeTenant('other-acts', 100)).toBe(0);
    expect(await store.purgeTenant('acts', 1)).toBe(1);
    expect(await store.purgeTenant('acts', 10_000)).toBe(n - 3);
    expect(await sql(`SELECT count(*)::int AS n FROM connection_activity`)).toEqual([{ n: 0 }]);
  });
});

describe('connection activity on the app’s clock: retention, the flush interval, shutdown', () => {
  it('is purged by the retention job once older than CONNECTION_ACTIVITY_RETENTION_DAYS on the app’s clock', async () => {
    const clock = new ManualClock(Date.now());
    const t = await startTestApp(
      {
        OPS_PROBE_INTERVAL_MS: '0',
        RETENTION_INTERVAL_MS: '3600000',
        CONNECTION_ACTIVITY_RETENTION_DAYS: '7',
      },
      { clock },
    );
    const rows = async () =>
      Number((await sqlOn(t.databaseUrl, `SELECT count(*)::int AS n FROM connection_activity`))[0].n);
    try {
      await control(t, '/reset');
      await createTenant(t, 'kept');
      await connectTenant(t, 'kept');
      await send(t, 'kept', 'kept-1', { rewards: [reward()] }).expect(201);
      clock.advance(1_000);
      const written = await waitFor(rows, (n) => n >= 2);
      const job = t.app.get(RetentionJob);
      clock.advance(6 * 86_400_000);
      await job.run();
      expect(await rows()).toBe(written);
      clock.advance(86_400_000 + 5_000);
      const result = await job.run();
      expect(result?.connection_activity).toBe(written);
      expect(await rows()).toBe(0);
    } finally {
      await t.close();
    }
  });

  it('keeps records in memory until their interval passes on the app’s clock, and writes what waits when the app stops', async () => {
    const db = await createTestDatabase();
    const clock = new ManualClock(Date.now());
    const t = await startTestAppOn(db.url, { OPS_PROBE_INTERVAL_MS: '0' }, { clock });
    const rows = async () =>
      Number((await sqlOn(db.url, `SELECT count(*)::int AS n FROM connection_activity`))[0].n);
    try {
      await control(t, '/reset');
      await createTenant(t, 'clocked');
      await connectTenant(t, 'clocked');
      await send(t, 'clocked', 'clock-1', { rewards: [reward()] }).expect(201);
      const recorder = t.app.get(ActivityRecorder);
      // The clock stands still: the records wait in the buffer, none is written.
      expect(recorder.pending).toBeGreaterThanOrEqual(2); // the webhook registration and the order, at least
      expect(await rows()).toBe(0);
      const waiting = recorder.pending;
      clock.advance(1_000);
      expect(await waitFor(rows, (n) => n === waiting)).toBe(waiting);
      expect(recorder.pending).toBe(0);
      // Another send, still within the interval: written only when the app stops.
      await send(t, 'clocked', 'clock-2', { rewards: [reward()] }).expect(201);
      expect(recorder.pending).toBeGreaterThanOrEqual(1);
      const more = recorder.pending;
      await t.close();
      expect(await rows()).toBe(waiting + more);
    } finally {
      await t.close().catch(() => undefined);
      await db.drop();
    }
  });
});
