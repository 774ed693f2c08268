import { createHmac, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Client } from 'pg';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { RETURN_URL, connectTenant, control, createTenant, op, startConnect } from './support/connect';
import { reward, send, waitFor } from './support/send';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Registration {
  account_id: string;
  id: string;
  url: string;
  private_key: string;
}

const sign = (body: string, key: string) => `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;

/** The service's event body, compact and keys in the documented order (as the sandbox sends it). */
function eventBody(
  event: string,
  rewardId: string,
  overrides: { uuid?: string; created_utc?: string; meta?: Json } = {},
): Json {
  return {
    event,
    uuid: overrides.uuid ?? randomUUID(),
    created_utc: overrides.created_utc ?? new Date().toISOString().replace('Z', '+00:00'),
    payload: { resource: { id: rewardId, type: 'rewards' }, meta: overrides.meta ?? {} },
  };
}

/** Helpers over one running gateway with its mounted sandbox. */
function helpers(get: () => { t: TestApp; db: Client }) {
  const h = {
    registrations: async () =>
      (await request(get().t.baseUrl).get('/sandbox/__control/webhooks').expect(200)).body
        .registrations as Registration[],
    registration: async (accountId: string) =>
      (await h.registrations()).find((r) => r.account_id === accountId) as Registration,
    deliveries: async (query = '') =>
      (await request(get().t.baseUrl).get(`/sandbox/__control/webhooks/deliveries${query}`).expect(200)).body
        .deliveries as Json[],
    webhooks: (settings: Json) => control(get().t, '/webhooks', settings),
    view: async (tenant: string, id: string) =>
      (await request(get().t.baseUrl).get(`/v1/tenants/${tenant}/dispatches/${id}`).set(op).expect(200))
        .body as Json,
    delivery: async (tenant: string, id: string, position = 0) =>
      (await h.view(tenant, id)).rewards[position].delivery as Json,
    metric: async (name: string, outcome: string) => {
      const text = (await request(get().t.baseUrl).get('/metrics').expect(200)).text;
      const m = new RegExp(`^${name}\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(text);
      return m ? Number(m[1]) : 0;
    },
    eventCount: async () =>
      Number((await get().db.query(`SELECT count(*)::int AS n FROM webhook_events`)).rows[0].n),
    /** POSTs a raw body to a webhook URL (absolute, as registered, or a path). */
    post: (url: string, raw: string, signature?: string, type = 'application/json') => {
      const path = url.startsWith('http') ? new URL(url).pathname + new URL(url).search : url;
      const req = request(get().t.baseUrl).post(path).set('Content-Type', type);
      if (signature !== undefined) req.set('Tremendous-Webhook-Signature', signature);
      return req.send(raw);
    },
    /** Sends rewards for `tenant` and returns the dispatch (201, every reward sent). */
    sendRewards: async (tenant: string, key: string, rewards: Json[]) => {
      const res = await send(get().t, tenant, key, { rewards }).expect(201);
      expect(res.body.rewards.map((r: Json) => r.delivery.state)).toEqual(rewards.map(() => 'pending'));
      return res.body as Json;
    },
  };
  return h;
}

/** Connects `tenant` to the sandbox account `accountId` (the consent page's account choice). */
async function connectToAccount(t: TestApp, tenant: string, accountId: string): Promise<string> {
  const { cookie, upstream } = await startConnect(t, tenant, { return_url: RETURN_URL });
  const consent = await request(t.baseUrl).get(`${upstream.pathname}${upstream.search}`).expect(200);
  const requestId = /name="request_id" value="([^"]+)"/.exec(consent.text)?.[1] as string;
  const decided = await request(t.baseUrl)
    .post('/sandbox/oauth/authorize/decision')
    .type('form')
    .send({ request_id: requestId, decision: 'approve', account_id: accountId })
    .expect(302);
  const callback = new URL(decided.headers.location);
  const done = await request(t.baseUrl)
    .get(`${callback.pathname}${callback.search}`)
    .set('Cookie', cookie)
    .expect(302);
  expect(done.headers.location).toContain('status=connected');
  return (await request(t.baseUrl).get(`/v1/tenants/${tenant}/connection`).set(op).expect(200)).body.id;
}

const person = (name: string) => reward({ recipient: { name, email: `${name}@example.com` } });

describe('delivery webhooks: the service’s signed events', () => {
  let t: TestApp;
  let db: Client;
  let shopConnection: string;
  const h = helpers(() => ({ t, db }));

  beforeAll(async () => {
    t = await startTestApp({
      DISPATCH_POLL_MS: '100',
      DELIVERY_RECONCILE_POLL_MS: '100',
      DELIVERY_WEBHOOK_RETRY_MS: '100',
    });
    await control(t, '/reset');
    await h.webhooks({ delay_ms: 300, retry_base_ms: 50 });
    await createTenant(t, 'shop');
    shopConnection = await connectTenant(t, 'shop');
    await createTenant(t, 'other');
    await connectToAccount(t, 'other', 'acc_other');
    db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db.end();
    await t.close();
  });
  beforeEach(async () => {
    await h.webhooks({
      enabled: true,
      delay_ms: 300,
      duplicate: false,
      out_of_order: false,
      fail_recipients: [],
    });
  });
  afterEach(async () => {
    await request(t.baseUrl).delete('/sandbox/__control/faults');
  });

  it('registers the account’s webhook at connect, before the redirect; the key is kept only encrypted', async () => {
    // connectTenant returned after the redirect: the registration was already there.
    const demo = await h.registration('acc_demo');
    const other = await h.registration('acc_other');
    const { rows } = await db.query(`SELECT * FROM webhook_keys ORDER BY created_at`);
    expect(rows).toHaveLength(2);
    const shopRow = rows.find((r) => r.connection_id === shopConnection);
    expect(shopRow).toMatchObject({
      environment: 'sandbox',
      status: 'registered',
      webhook_id: demo.id,
      attempts: 1,
      next_attempt_at: null,
      last_error: null,
    });
    expect(demo.url).toBe(`${t.baseUrl}/webhooks/rewards/sandbox?account=${shopRow.id}`);
    expect(other.url).toMatch(new RegExp(`^${t.baseUrl}/webhooks/rewards/sandbox\\?account=[0-9a-f-]{36}$`));
    expect(other.private_key).not.toBe(demo.private_key);
    for (const row of rows) {
      expect(row.private_key_enc).toMatch(/^v1:test1:/);
      expect(row.private_key_enc).not.toContain(demo.private_key);
      expect(row.private_key_enc).not.toContain(other.private_key);
    }
    // Never in a log line or an answer.
    const logs = t.logs.join('');
    expect(logs).not.toContain(demo.private_key);
    expect(logs).not.toContain(other.private_key);
    const connection = await request(t.baseUrl).get('/v1/tenants/shop/connection').set(op).expect(200);
    expect(JSON.stringify(connection.body)).not.toContain(demo.private_key);
    const ops = await request(t.baseUrl).get(`/v1/ops/connections/${shopConnection}`).set(op).expect(200);
    expect(JSON.stringify(ops.body)).not.toContain(demo.private_key);
  });

  it('moves a delivered and a failed reward to delivered / delivery_failed through the service’s webhooks', async () => {
    await h.webhooks({ fail_recipients: ['bounce@example.com'] });
    const applied = await h.metric('rg_delivery_webhooks_total', 'applied');
    const d = await h.sendRewards('shop', 'both-outcomes', [person('ada'), person('bounce')]);
    const view = await waitFor(
      () => h.view('shop', d.id),
      (v) => v.rewards.every((r: Json) => r.delivery.state !== 'pending'),
    );
    expect(view.rewards[0].delivery).toEqual({ method: 'EMAIL', status: 'SUCCEEDED', state: 'delivered' });
    expect(view.rewards[1].delivery).toEqual({
      method: 'EMAIL',
      status: 'FAILED',
      state: 'delivery_failed',
      failure_reason: 'email_delivery_failed',
    });
    // Over real HTTP, each event finally answered 2xx (a retry by the sandbox, on a loaded machine, is the same uuid);
    // each uuid recorded once.
    const log = await h.deliveries();
    const attempts = log.filter((e) => [view.rewards[0].id, view.rewards[1].id].includes(e.resource_id));
    const last = new Map<string, Json>();
    for (const e of attempts) if ((last.get(e.uuid)?.attempt ?? 0) < e.attempt) last.set(e.uuid, e);
    const mine = [...last.values()];
    expect(mine.map((e) => [e.event, e.status_code]).sort()).toEqual([
      ['REWARDS.DELIVERY.FAILED', 200],
      ['REWARDS.DELIVERY.SUCCEEDED', 200],
    ]);
    const { rows } = await db.query(
      `SELECT uuid, connection_id, event FROM webhook_events WHERE uuid = ANY($1)`,
      [mine.map((e) => e.uuid)],
    );
    expect(rows).toHaveLength(2);
    expect(rows.every((r) => r.connection_id === shopConnection)).toBe(true);
    expect(await h.metric('rg_delivery_webhooks_total', 'applied')).toBe(applied + 2);
  });

  it('refuses a forged, missing or foreign signature with 401 in our shape; nothing is stored or changed', async () => {
    await h.webhooks({ delay_ms: 3_600_000 }); // the service's own event will not come during this test
    const d = await h.sendRewards('shop', 'forged', [person('forged')]);
    const rewardId = d.rewards[0].id as string;
    const demo = await h.registration('acc_demo');
    const other = await h.registration('acc_other');
    const events = await h.eventCount();
    const bad = await h.metric('rg_delivery_webhooks_total', 'bad_signature');
    const raw = JSON.stringify(eventBody('REWARDS.DELIVERY.SUCCEEDED', rewardId));

    const attempts = [
      await h.post(demo.url, raw, sign(raw, 'not-the-key')),
      await h.post(demo.url, raw), // no signature
      await h.post(demo.url, raw, 'sha256=abc'), // malformed
      await h.post(demo.url, raw, sign(`${raw} `, demo.private_key)), // signed another body
      await h.post(demo.url, raw, sign(raw, other.private_key)), // another account's key on this URL
      await h.post('/webhooks/rewards/sandbox', raw, sign(raw, 'not-the-key')), // no ?account=: keys tried
    ];
    for (const res of attempts) {
      expect(res.status).toBe(401);
      expect(res.body).toEqual({
        error: {
          code: 'webhook_signature_invalid',
          message: expect.stringContaining('Tremendous-Webhook-Signature'),
          details: [],
        },
      });
    }
    expect(await h.delivery('shop', d.id)).toMatchObject({ state: 'pending', status: 'SCHEDULED' });
    expect(await h.eventCount()).toBe(events);
    expect(await h.metric('rg_delivery_webhooks_total', 'bad_signature')).toBe(bad + attempts.length);

    // The same body with the right key goes through.
    const ok = await h.post(demo.url, raw, sign(raw, demo.private_key)).expect(200);
    expect(ok.body).toEqual({ received: true, outcome: 'applied' });
    expect(await h.delivery('shop', d.id)).toMatchObject({ state: 'delivered', status: 'SUCCEEDED' });
    expect(await h.eventCount()).toBe(events + 1);
  });

  it('accepts a signature over the raw body and one over the JSON as re-serialised', async () => {
    await h.webhooks({ delay_ms: 3_600_000 });
    const d = await h.sendRewards('shop', 'reserialised', [person('pretty1'), person('pretty2')]);
    const demo = await h.registration('acc_demo');
    // Pretty-printed: the raw bytes differ from JSON.stringify(JSON.parse(raw)).
    const first = JSON.stringify(eventBody('REWARDS.DELIVERY.SUCCEEDED', d.rewards[0].id), null, 2);
    const compact = JSON.stringify(JSON.parse(first));
    expect(compact).not.toBe(first);
    const overCompact = await h.post(demo.url, first, sign(compact, demo.private_key)).expect(200);
    expect(overCompact.body.outcome).toBe('applied');
    const second = JSON.stringify(
      eventBody('REWARDS.DELIVERY.FAILED', d.rewards[1].id, {
        meta: { failure_reason: 'mailbox_unavailable', retryable: true },
      }),
      null,
      4,
    );
    const overRaw = await h.post(demo.url, second, sign(second, demo.private_key)).expect(200);
    expect(overRaw.body.outcome).toBe('applied');
    const view = await h.view('shop', d.id);
    expect(view.rewards[0].delivery).toMatchObject({ state: 'delivered', status: 'SUCCEEDED' });
    expect(view.rewards[1].delivery).toMatchObject({
      state: 'delivery_failed',
      status: 'FAILED',
      failure_reason: 'mailbox_unavailable',
    });
  });

  it('answers a replayed event (the service sends it twice) 2xx and changes nothing the second time', async () => {
    await h.webhooks({ duplicate: true });
    const duplicates = await h.metric('rg_delivery_webhooks_total', 'duplicate');
    const d = await h.sendRewards('shop', 'twice', [person('twice')]);
    const rewardId = d.rewards[0].id as string;
    const log = await waitFor(
      () => h.deliveries(`?resource_id=${rewardId}`),
      (l) => l.length === 2,
    );
    expect(log[0].uuid).toBe(log[1].uuid);
    expect(log.map((e) => e.status_code)).toEqual([200, 200]);
    expect(await h.delivery('shop', d.id)).toMatchObject({ state: 'delivered' });
    const before = (
      await db.query(
        `SELECT delivery_event_at, updated_at FROM dispatch_rewards WHERE upstream_reward_id = $1`,
        [rewardId],
      )
    ).rows[0];
    expect(await h.metric('rg_delivery_webhooks_total', 'duplicate')).toBe(duplicates + 1);
    expect(
      (await db.query(`SELECT count(*)::int AS n FROM webhook_events WHERE uuid = $1`, [log[0].uuid])).rows[0]
        .n,
    ).toBe(1);

    // Replayed by anyone who captured it: still the same answer, nothing changes.
    const demo = await h.registration('acc_demo');
    const replay = await h.post(demo.url, log[0].body as string, log[0].signature as string).expect(200);
    expect(replay.body).toEqual({ received: true, outcome: 'duplicate' });
    const after = (
      await db.query(
        `SELECT delivery_event_at, updated_at FROM dispatch_rewards WHERE upstream_reward_id = $1`,
        [rewardId],
      )
    ).rows[0];
    expect(after).toEqual(before);
  });

  it('keeps the newer state when an older event of the other outcome arrives after it (out of order)', async () => {
    await h.webhooks({ out_of_order: true, fail_recipients: ['late-bounce@example.com'] });
    const ignored = await h.metric('rg_delivery_webhooks_total', 'ignored');
    const d = await h.sendRewards('shop', 'out-of-order', [person('late-ok'), person('late-bounce')]);
    const ids = d.rewards.map((r: Json) => r.id as string);
    // Each reward: its real outcome first, then the stale opposite one (1 s older created_utc).
    for (const id of ids)
      await waitFor(
        () => h.deliveries(`?resource_id=${id}`),
        (l) => l.length === 2 && l.every((e) => e.ok),
      );
    const view = await h.view('shop', d.id);
    expect(view.rewards[0].delivery).toMatchObject({ state: 'delivered', status: 'SUCCEEDED' });
    expect(view.rewards[1].delivery).toMatchObject({
      state: 'delivery_failed',
      status: 'FAILED',
      failure_reason: 'email_delivery_failed',
    });
    expect(await h.metric('rg_delivery_webhooks_total', 'ignored')).toBe(ignored + 2);

    // A fresh (new uuid) but older event changes nothing either.
    const demo = await h.registration('acc_demo');
    const stale = JSON.stringify(
      eventBody('REWARDS.DELIVERY.FAILED', ids[0], { created_utc: '2020-01-01T00:00:00.000+00:00' }),
    );
    const res = await h.post(demo.url, stale, sign(stale, demo.private_key)).expect(200);
    expect(res.body.outcome).toBe('ignored');
    expect((await h.view('shop', d.id)).rewards.map((r: Json) => r.delivery)).toEqual(
      view.rewards.map((r: Json) => r.delivery),
    );
  });

  it('ignores (2xx) events of another account, of rewards it does not know and of types it does not act on', async () => {
    await h.webhooks({ delay_ms: 3_600_000 });
    const d = await h.sendRewards('shop', 'foreign', [person('foreign')]);
    const rewardId = d.rewards[0].id as string;
    const other = await h.registration('acc_other');
    const events = await h.eventCount();

    // Correctly signed by the other account, about shop's reward: not that account's reward.
    const foreign = JSON.stringify(eventBody('REWARDS.DELIVERY.SUCCEEDED', rewardId));
    const a = await h.post(other.url, foreign, sign(foreign, other.private_key)).expect(200);
    expect(a.body).toEqual({ received: true, outcome: 'ignored' });
    // Without ?account=, the key is found among the environment's: still the other account's.
    const b = JSON.stringify(eventBody('REWARDS.DELIVERY.SUCCEEDED', rewardId));
    expect(
      (await h.post('/webhooks/rewards/sandbox', b, sign(b, other.private_key)).expect(200)).body.outcome,
    ).toBe('ignored');
    const unknown = JSON.stringify(eventBody('REWARDS.DELIVERY.SUCCEEDED', 'NOSUCHREWARD1'));
    const demo = await h.registration('acc_demo');
    expect((await h.post(demo.url, unknown, sign(unknown, demo.private_key)).expect(200)).body.outcome).toBe(
      'ignored',
    );
    const orders = JSON.stringify({
      ...eventBody('ORDERS.CREATED', 'ORDER1234567'),
      event: 'ORDERS.CREATED',
    });
    expect((await h.post(demo.url, orders, sign(orders, demo.private_key)).expect(200)).body.outcome).toBe(
      'ignored',
    );
    expect(await h.delivery('shop', d.id)).toMatchObject({ state: 'pending' });
    expect(await h.eventCount()).toBe(events + 4); // decided irrelevant: recorded, so a retry is a duplicate
    const logs = t.logs.join('');
    expect(logs.match(/a webhook event the gateway does not act on/g)).toHaveLength(1);

    // Without ?account=, shop's own key is found too, and applies.
    const own = JSON.stringify(eventBody('REWARDS.DELIVERY.SUCCEEDED', rewardId));
    const res = await h.post('/webhooks/rewards/sandbox', own, sign(own, demo.private_key)).expect(200);
    expect(res.body.outcome).toBe('applied');
  });

  it('keeps unauthenticated traffic cheap: environment, signature, type and size are checked before the body', async () => {
    const demo = await h.registration('acc_demo');
    const path = new URL(demo.url).pathname + new URL(demo.url).search;
    const ok = JSON.stringify(eventBody('REWARDS.DELIVERY.SUCCEEDED', 'NOSUCHREWARD2'));
    const big = JSON.stringify({ ...eventBody('X.Y', 'R'), pad: 'x'.repeat(70 * 1024) });
    const cases: [request.Test, number, string][] = [
      [h.post('/webhooks/rewards/production', ok, sign(ok, demo.private_key)), 404, 'not_found'],
      [h.post('/webhooks/rewards/nope', ok, sign(ok, demo.private_key)), 404, 'not_found'],
      [h.post(path, ok, sign(ok, demo.private_key), 'text/plain'), 415, 'unsupported_media_type'],
      [h.post(path, big, sign(big, demo.private_key)), 413, 'payload_too_large'],
      [h.post(path, '{"event":', sign('{"event":', demo.private_key)), 400, 'invalid_json'],
      [h.post(path, ok, undefined, 'text/plain'), 401, 'webhook_signature_invalid'],
    ];
    for (const [req, status, code] of cases) {
      const res = await req;
      expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
      expect(res.headers['x-request-id']).toBeDefined();
    }
    await request(t.baseUrl).get(path).expect(404);
    // Chunked (no Content-Length), over the limit: reading stops at 64 KiB, 413.
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${t.baseUrl}${path}`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'Tremendous-Webhook-Signature': sign(big, demo.private_key),
        },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      for (let i = 0; i < big.length; i += 8192) req.write(big.slice(i, i + 8192));
      req.end();
    });
    expect(chunked).toBe(413);
  });

  it('a failed registration does not fail the connect; it is retried in the background, and events keep applying', async () => {
    await request(t.baseUrl)
      .post('/sandbox/__control/faults')
      .send({ route: 'webhooks', status: 503, times: 3 })
      .expect(201);
    await createTenant(t, 'late');
    const lateConnection = await connectTenant(t, 'late'); // the same account as shop (acc_demo)
    const row = async () =>
      (await db.query(`SELECT * FROM webhook_keys WHERE connection_id = $1`, [lateConnection])).rows[0];
    const failed = await row();
    expect(failed).toMatchObject({ status: 'failed', webhook_id: null, private_key_enc: null });
    expect(failed.last_error).toMatch(/^upstream_unavailable \(503\)/);
    expect(failed.next_attempt_at).not.toBeNull();
    const registered = await waitFor(row, (r) => r.status === 'registered', 10_000);
    const demo = await h.registration('acc_demo');
    expect(registered).toMatchObject({ webhook_id: demo.id, last_error: null, next_attempt_at: null });
    expect(registered.attempts).toBe(4);
    // The account's one webhook now points at late's registration: shop's rewards still get their events.
    expect(demo.url).toContain(`account=${registered.id}`);
    const d = await h.sendRewards('shop', 'after-repoint', [person('repointed')]);
    await waitFor(
      () => h.delivery('shop', d.id),
      (v) => v.state === 'delivered',
    );
    expect(t.logs.join('')).not.toContain(demo.private_key);
  });
});

describe('delivery reconciliation: missed webhooks', () => {
  let t: TestApp;
  let db: Client;
  const h = helpers(() => ({ t, db }));

  beforeAll(async () => {
    t = await startTestApp({
      DISPATCH_POLL_MS: '100',
      DELIVERY_RECONCILE_AFTER_MS: '300',
      DELIVERY_RECHECK_MS: '300',
      DELIVERY_RECONCILE_POLL_MS: '100',
    });
    await control(t, '/reset');
    await createTenant(t, 'shop');
    await connectTenant(t, 'shop');
    db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db.end();
    await t.close();
  });
  afterEach(async () => {
    await request(t.baseUrl).delete('/sandbox/__control/faults');
  });

  it('reaches delivered / delivery_failed by polling GET /rewards/{id} when no webhook comes', async () => {
    await h.webhooks({ enabled: false, delay_ms: 800, fail_recipients: ['quiet-bounce@example.com'] });
    const d = await h.sendRewards('shop', 'quiet', [person('quiet-ok'), person('quiet-bounce')]);
    const view = await waitFor(
      () => h.view('shop', d.id),
      (v) => v.rewards.every((r: Json) => r.delivery.state !== 'pending'),
    );
    expect(view.rewards[0].delivery).toEqual({ method: 'EMAIL', status: 'SUCCEEDED', state: 'delivered' });
    expect(view.rewards[1].delivery).toEqual({ method: 'EMAIL', status: 'FAILED', state: 'delivery_failed' });
    expect(await h.deliveries()).toEqual([]); // no webhook was sent
    expect(await h.metric('rg_delivery_reconciliations_total', 'delivered')).toBeGreaterThanOrEqual(1);
    expect(await h.metric('rg_delivery_reconciliations_total', 'delivery_failed')).toBeGreaterThanOrEqual(1);
    // Polled at least once while still SCHEDULED (pending, checked again), and no more once final.
    expect(await h.metric('rg_delivery_reconciliations_total', 'pending')).toBeGreaterThanOrEqual(1);
    const { rows } = await db.query(`SELECT delivery_check_at FROM dispatch_rewards WHERE dispatch_id = $1`, [
      d.id,
    ]);
    expect(rows.map((r) => r.delivery_check_at)).toEqual([null, null]);
  });

  it('stops checking a reward the service does not know (404) or whose connection is gone', async () => {
    await h.webhooks({ enabled: false, delay_ms: 3_600_000 });
    const checkAt = async (id: string) =>
      (await db.query(`SELECT delivery_check_at FROM dispatch_rewards WHERE dispatch_id = $1`, [id])).rows[0]
        .delivery_check_at as Date | null;

    await request(t.baseUrl)
      .post('/sandbox/__control/faults')
      .send({ route: 'reward', status: 404 })
      .expect(201);
    const lost = await h.sendRewards('shop', 'lost', [person('lost')]);
    expect(await checkAt(lost.id)).not.toBeNull();
    await waitFor(
      () => checkAt(lost.id),
      (v) => v === null,
    );
    expect(await h.delivery('shop', lost.id)).toMatchObject({ state: 'pending', status: 'SCHEDULED' });
    await request(t.baseUrl).delete('/sandbox/__control/faults');

    const gone = await h.sendRewards('shop', 'gone', [person('gone')]);
    await request(t.baseUrl).delete('/v1/tenants/shop/connection').set(op).expect(200);
    await waitFor(
      () => checkAt(gone.id),
      (v) => v === null,
    );
    expect(await h.metric('rg_delivery_reconciliations_total', 'not_found')).toBeGreaterThanOrEqual(1);
    expect(await h.metric('rg_delivery_reconciliations_total', 'connection_gone')).toBeGreaterThanOrEqual(1);
  });
});
