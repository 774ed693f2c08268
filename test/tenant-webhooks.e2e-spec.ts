import { randomBytes, randomUUID } from 'node:crypto';
import dns from 'node:dns';
import request from 'supertest';
import { ConnectionStateStore } from '../src/connections/connection-state.store';
import { Database } from '../src/database/database';
import { DispatchStore } from '../src/reward-dispatch/dispatch.store';
import { WebhookStore } from '../src/tenant-webhooks/webhook.store';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import type { TestApp } from './support/app';
import { startTestApp, startTestAppOn } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { createTestDatabase, sqlOn } from './support/database';
import { reward, send, waitFor } from './support/send';
import { type ReceivedWebhook, verified, WebhookReceiver } from './support/webhook-receiver';

/** Small values: retries every few hundred ms, a short timeout; private targets allowed (the receiver is local). */
const WEBHOOK_ENV = {
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  WEBHOOK_POLL_MS: '100',
  WEBHOOK_RETRY_SCHEDULE_MS: '200,400,800',
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_GIVE_UP_AFTER_MS: '600000',
  WEBHOOK_DISABLE_AFTER_MS: '600000',
};

const settle = (ms = 1_000) => new Promise((r) => setTimeout(r, ms));
const api = (tenant: string) => `/v1/tenants/${tenant}/webhooks`;

interface Registered {
  id: string;
  url: string;
  events: string[];
  secret: string;
  created_at: string;
}
async function registerOn(t: TestApp, tenant: string, url: string, events: string[]): Promise<Registered> {
  return (await request(t.baseUrl).post(api(tenant)).set(op).send({ url, events }).expect(201))
    .body as Registered;
}

/** The vault key of the gateways started again on one database (the data stays theirs). */
const VAULT_KEYS = `test1:${randomBytes(32).toString('base64')}`;

/**
 * The gateway of a test database started again with other settings (the configuration is fixed for a process's
 * life): `current` is closed first; the sandbox's state, and so every connection's grant, survives the restart.
 */
async function restartOn(
  url: string,
  current: TestApp | undefined,
  env: Record<string, string>,
): Promise<TestApp> {
  await current?.close();
  const t = await startTestAppOn(url, { ...WEBHOOK_ENV, VAULT_KEYS, ...env });
  await control(t, '/webhooks', { enabled: false });
  return t;
}
const countBy = (items: string[]) =>
  items.reduce<Record<string, number>>((acc, k) => ({ ...acc, [k]: (acc[k] ?? 0) + 1 }), {});

describe('tenant webhooks: registration, events, retries, replay, SSRF', () => {
  let t: TestApp;
  const receiver = new WebhookReceiver();
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const register = (tenant: string, url: string, events: string[]) => registerOn(t, tenant, url, events);

  beforeAll(async () => {
    t = await startTestApp(WEBHOOK_ENV);
    await receiver.start();
    // The sandbox's own delivery events (→ reward.delivered) are off except in the test that is about them: the
    // other tests change delivery states themselves and count every event.
    await control(t, '/webhooks', { enabled: false });
    await createTenant(t, 'hooky');
    await connectTenant(t, 'hooky');
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  it('registers an endpoint: the secret is shown once, stored only encrypted, and never listed', async () => {
    const created = await register('hooky', receiver.url('/once'), ['reward.sent', 'dispatch.completed']);
    expect(Object.keys(created).sort()).toEqual(['created_at', 'events', 'id', 'secret', 'url']);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(created.events).toEqual(['dispatch.completed', 'reward.sent']);

    const one = await request(t.baseUrl)
      .get(`${api('hooky')}/${created.id}`)
      .set(op)
      .expect(200);
    expect(one.body).toMatchObject({
      id: created.id,
      url: created.url,
      status: 'active',
      consecutive_failures: 0,
      disabled_at: null,
    });
    const list = await request(t.baseUrl).get(api('hooky')).set(op).expect(200);
    expect(list.body.webhooks.map((w: { id: string }) => w.id)).toContain(created.id);
    const base64 = created.secret.slice('whsec_'.length);
    for (const text of [one.text, list.text]) {
      expect(text).not.toContain(base64);
      expect(text).not.toContain('secret');
    }
    const [stored] = await sql(`SELECT secret_enc FROM webhook_endpoints WHERE id = $1`, [created.id]);
    expect(stored.secret_enc).toMatch(/^v1:test1:/);
    expect(stored.secret_enc).not.toContain(base64);
    expect(t.logs.join('')).not.toContain(base64);

    await request(t.baseUrl)
      .delete(`${api('hooky')}/${created.id}`)
      .set(op)
      .expect(204);
    const gone = await request(t.baseUrl)
      .get(`${api('hooky')}/${created.id}`)
      .set(op)
      .expect(404);
    expect(gone.body.error.code).toBe('webhook_endpoint_not_found');
    await request(t.baseUrl)
      .get(`${api('hooky')}/not-a-uuid`)
      .set(op)
      .expect(404);
  });

  it('answers 400 naming the field for a bad url or events, 409 past 10 endpoints, and scopes tenant keys', async () => {
    const bad = async (body: Record<string, unknown>, field: string) => {
      const res = await request(t.baseUrl).post(api('hooky')).set(op).send(body).expect(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    };
    const ok = receiver.url('/x');
    await bad({ events: ['*'] }, 'url');
    await bad({ url: 'ftp://example.com/hook', events: ['*'] }, 'url');
    await bad({ url: 'not a url', events: ['*'] }, 'url');
    await bad({ url: `https://example.com/${'a'.repeat(2048)}`, events: ['*'] }, 'url');
    await bad({ url: 'https://user:pw@example.com/hook', events: ['*'] }, 'url');
    await bad({ url: 42, events: ['*'] }, 'url');
    await bad({ url: ok }, 'events');
    await bad({ url: ok, events: [] }, 'events');
    await bad({ url: ok, events: 'reward.sent' }, 'events');
    await bad({ url: ok, events: ['reward.sent', 'reward.exploded'] }, 'events');
    await bad({ url: ok, events: ['*', 'reward.sent'] }, 'events');
    await bad({ url: ok, events: ['reward.sent', 'reward.sent'] }, 'events');
    await bad({ url: ok, events: ['*'], secret: 'mine' }, 'secret');

    await createTenant(t, 'many');
    const key = (
      await request(t.baseUrl).post('/v1/tenants/many/api-keys').set(op).send({ name: 'svc' }).expect(201)
    ).body.key as string;
    const asTenant = { Authorization: `Bearer ${key}` };
    for (let i = 0; i < 10; i++) {
      await request(t.baseUrl)
        .post(api('many'))
        .set(asTenant)
        .send({ url: receiver.url(`/many/${i}`), events: ['*'] })
        .expect(201);
    }
    const full = await request(t.baseUrl)
      .post(api('many'))
      .set(asTenant)
      .send({ url: receiver.url('/many/10'), events: ['*'] })
      .expect(409);
    expect(full.body.error.code).toBe('webhook_endpoint_limit_reached');
    // Another tenant's key sees no endpoint of this one: the tenant does not exist for it.
    const foreign = await request(t.baseUrl).get(api('hooky')).set(asTenant).expect(404);
    expect(foreign.body.error.code).toBe('tenant_not_found');
    await request(t.baseUrl).get(api('hooky')).expect(401);
    const own = await request(t.baseUrl).get(api('many')).set(asTenant).expect(200);
    expect(own.body.webhooks).toHaveLength(10);
  });

  it('delivers each event once per state change, signed (verified with standardwebhooks), to subscribers only', async () => {
    const all = await register('hooky', receiver.url('/all'), ['*']);
    const sentOnly = await register('hooky', receiver.url('/sent-only'), ['reward.sent']);

    // reward.sent + dispatch.completed
    const first = await send(t, 'hooky', 'wh-1', { rewards: [reward()] }).expect(201);
    const second = await send(t, 'hooky', 'wh-2', {
      external_reference: 'payroll-7',
      rewards: [reward({ recipient: { name: 'Bob', email: 'bob@example.com' } })],
    }).expect(201);
    await send(t, 'hooky', 'wh-1', { rewards: [reward()] }).expect(201); // a replay of the request: no new state change
    await waitFor(
      async () => receiver.accepted('/all').length,
      (n) => n >= 4,
    );

    // reward.delivered / reward.delivery_failed, through the store that records the service's delivery events.
    const connectionId = (await request(t.baseUrl).get('/v1/tenants/hooky/connection').set(op)).body
      .id as string;
    const store = t.app.get(DispatchStore);
    const at = new Date();
    expect(
      await store.recordDelivery(first.body.rewards[0].id, [connectionId], {
        state: 'delivered',
        status: 'SUCCEEDED',
        reason: null,
        eventAt: at,
      }),
    ).not.toBeNull();
    // The same event again changes nothing: no second event.
    expect(
      await store.recordDelivery(first.body.rewards[0].id, [connectionId], {
        state: 'delivered',
        status: 'SUCCEEDED',
        reason: null,
        eventAt: at,
      }),
    ).toBeNull();
    await store.recordDelivery(second.body.rewards[0].id, [connectionId], {
      state: 'delivery_failed',
      status: 'FAILED',
      reason: 'mailbox does not exist',
      eventAt: at,
    });

    // connection.needs_reauth: the account holder revokes the app, the next refresh gets invalid_grant.
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    await request(t.baseUrl)
      .post(`/sandbox/__control/grants/${stats.grants.at(-1).id}/revoke`)
      .send({});
    await t.app
      .get(AccessTokenProvider)
      .forceRefresh(connectionId)
      .catch(() => undefined);
    expect((await request(t.baseUrl).get('/v1/tenants/hooky/connection').set(op)).body.status).toBe(
      'needs_reauth',
    );
    // connection.recovered: the tenant connects again (a new connection replaces the broken one).
    const newConnectionId = await connectTenant(t, 'hooky');

    const expected = {
      'reward.sent': 2,
      'dispatch.completed': 2,
      'reward.delivered': 1,
      'reward.delivery_failed': 1,
      'connection.needs_reauth': 1,
      'connection.recovered': 1,
    };
    await waitFor(
      async () => receiver.accepted('/all').length,
      (n) => n >= 8,
    );
    await settle(); // anything extra would arrive now

    const payloads = receiver.accepted('/all').map((r) => ({ r, p: verified(all.secret, r) }));
    expect(countBy(payloads.map(({ p }) => p.type))).toEqual(expected);
    expect(new Set(payloads.map(({ r }) => r.id)).size).toBe(payloads.length); // one webhook-id per event
    for (const { r, p } of payloads) {
      expect(r.contentType).toBe('application/json');
      expect(p.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(p.data.tenant_id).toBe('hooky');
      expect(r.body).not.toMatch(/whsec_|access_token|refresh_token|"link"/);
    }
    // The other endpoint's secret does not verify these: each endpoint signs with its own.
    expect(() => verified(sentOnly.secret, payloads[0].r)).toThrow();

    const of = (type: string) => payloads.filter(({ p }) => p.type === type).map(({ p }) => p.data);
    expect(of('reward.sent')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          dispatch_id: first.body.id,
          position: 0,
          status: 'sent',
          external_id: first.body.rewards[0].external_id,
          reward_id: first.body.rewards[0].id,
          upstream_order_id: first.body.rewards[0].upstream_order_id,
          idempotency_key: 'wh-1',
          environment: 'sandbox',
          delivery_method: 'EMAIL',
        }),
      ]),
    );
    expect(of('dispatch.completed')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          dispatch_id: second.body.id,
          status: 'sent',
          external_reference: 'payroll-7',
          counts: expect.objectContaining({ sent: 1, failed: 0, pending: 0 }),
        }),
      ]),
    );
    expect(of('reward.delivered')[0]).toMatchObject({
      dispatch_id: first.body.id,
      reward_id: first.body.rewards[0].id,
      delivery_state: 'delivered',
      delivery_status: 'SUCCEEDED',
    });
    expect(of('reward.delivery_failed')[0]).toMatchObject({
      dispatch_id: second.body.id,
      delivery_state: 'delivery_failed',
      delivery_reason: 'mailbox does not exist',
    });
    expect(of('connection.needs_reauth')[0]).toMatchObject({
      connection_id: connectionId,
      status: 'needs_reauth',
      environment: 'sandbox',
    });
    expect(of('connection.recovered')[0]).toMatchObject({
      connection_id: newConnectionId,
      replaced_connection_id: connectionId,
      status: 'active',
    });

    // The subscriber of reward.sent only got those two.
    const narrow = receiver.accepted('/sent-only').map((r) => verified(sentOnly.secret, r));
    expect(narrow.map((p) => p.type)).toEqual(['reward.sent', 'reward.sent']);

    // The deliveries view.
    const deliveries = await request(t.baseUrl)
      .get(`${api('hooky')}/${all.id}/deliveries`)
      .set(op)
      .expect(200);
    expect(deliveries.body.deliveries).toHaveLength(8);
    for (const d of deliveries.body.deliveries) {
      expect(d).toMatchObject({
        status: 'delivered',
        attempts: 1,
        last_status_code: 200,
        next_attempt_at: null,
      });
      expect(payloads.map(({ r }) => r.id)).toContain(d.id);
    }
    // `?limit=` as every listing takes it (PageQueryDto): 1–200, a number.
    const two = await request(t.baseUrl)
      .get(`${api('hooky')}/${all.id}/deliveries?limit=2&status=delivered`)
      .set(op)
      .expect(200);
    expect(two.body.deliveries).toHaveLength(2);
    for (const bad of ['0', '201', 'many']) {
      const refused = await request(t.baseUrl)
        .get(`${api('hooky')}/${all.id}/deliveries?limit=${bad}`)
        .set(op)
        .expect(400);
      expect(refused.body.error.details.map((x: { field: string }) => x.field)).toEqual(['limit']);
    }

    // An endpoint registered now does not get the events from before it existed.
    const late = await register('hooky', receiver.url('/late'), ['*']);
    await settle(500);
    expect(receiver.all('/late')).toHaveLength(0);
    const lateDeliveries = await request(t.baseUrl)
      .get(`${api('hooky')}/${late.id}/deliveries`)
      .set(op)
      .expect(200);
    expect(lateDeliveries.body.deliveries).toHaveLength(0);
    for (const id of [all.id, sentOnly.id, late.id])
      await request(t.baseUrl)
        .delete(`${api('hooky')}/${id}`)
        .set(op)
        .expect(204);
  });

  it('turns the rewards service’s delivery events into reward.delivered / reward.delivery_failed, end to end', async () => {
    // The real path: the sandbox delivers the rewards and POSTs its signed delivery events to the gateway, which
    // records them (delivery-webhooks → DispatchStore), which queues the tenant's events in that transaction.
    await control(t, '/webhooks', { enabled: true, delay_ms: 100, fail_recipients: ['bounce@example.com'] });
    try {
      await createTenant(t, 'delivering');
      await connectTenant(t, 'delivering');
      const endpoint = await register('delivering', receiver.url('/delivering'), [
        'reward.delivered',
        'reward.delivery_failed',
      ]);
      const sent = await send(t, 'delivering', 'dl-1', {
        rewards: [reward(), reward({ recipient: { name: 'Bounce', email: 'bounce@example.com' } })],
      }).expect(201);
      await waitFor(
        async () => receiver.accepted('/delivering').length,
        (n) => n >= 2,
      );
      await settle();
      const events = receiver.accepted('/delivering').map((r) => verified(endpoint.secret, r));
      expect(events.map((e) => e.type).sort()).toEqual(['reward.delivered', 'reward.delivery_failed']);
      const delivered = events.find((e) => e.type === 'reward.delivered')?.data;
      const failed = events.find((e) => e.type === 'reward.delivery_failed')?.data;
      expect(delivered).toMatchObject({
        dispatch_id: sent.body.id,
        position: 0,
        delivery_state: 'delivered',
      });
      expect(failed).toMatchObject({
        dispatch_id: sent.body.id,
        position: 1,
        delivery_state: 'delivery_failed',
      });
      expect(failed?.delivery_reason).toEqual(expect.any(String));
    } finally {
      await control(t, '/webhooks', { enabled: false, fail_recipients: [] });
    }
  });

  it('writes no outbox row for a tenant without endpoints', async () => {
    await createTenant(t, 'quiet');
    await connectTenant(t, 'quiet');
    await send(t, 'quiet', 'q-1', {
      rewards: [reward(), reward({ recipient: { name: 'B', email: 'b@example.com' } })],
    }).expect(201);
    expect((await sql(`SELECT count(*)::int AS n FROM webhook_outbox WHERE tenant_id = 'quiet'`))[0].n).toBe(
      0,
    );
  });

  it('queues an event with the change that commits, none with one that rolls back, and none for a non-change', async () => {
    await createTenant(t, 'atomic');
    const connectionId = await connectTenant(t, 'atomic');
    await register('atomic', receiver.url('/atomic'), ['connection.needs_reauth', 'connection.recovered']);
    const state = t.app.get(ConnectionStateStore);
    const db = t.app.get(Database);
    const queued = async () =>
      (
        await sql(
          `SELECT event_type, payload FROM webhook_outbox WHERE tenant_id = 'atomic' ORDER BY created_at, event_type`,
        )
      ).map((r) => ({ type: r.event_type, data: r.payload.data }));
    const status = async () =>
      (await sql(`SELECT status FROM connections WHERE id = $1`, [connectionId]))[0].status;

    // The change rolls back (the transaction fails after it): neither the change nor its event remains.
    await expect(
      db.transaction(async (tx) => {
        await state.markNeedsReauth(tx, connectionId, 'invalid_grant', 'revoked', {});
        throw new Error('the rest of the transaction failed');
      }),
    ).rejects.toThrow('the rest of the transaction failed');
    expect(await status()).toBe('active');
    expect(await queued()).toEqual([]);

    // It commits: one event. Marked again (already broken), nothing more. Refreshed: active again, recovered.
    await db.transaction((tx) => state.markNeedsReauth(tx, connectionId, 'invalid_grant', 'revoked', {}));
    await db.transaction((tx) => state.markNeedsReauth(tx, connectionId, 'invalid_grant', 'again', {}));
    await db.transaction((tx) => state.markRefreshed(tx, connectionId, new Date(Date.now() + 3_600_000), {}));
    await db.transaction((tx) => state.markRefreshed(tx, connectionId, new Date(Date.now() + 3_600_000), {}));
    expect(await status()).toBe('active');
    expect(await queued()).toEqual([
      {
        type: 'connection.needs_reauth',
        data: {
          tenant_id: 'atomic',
          connection_id: connectionId,
          environment: 'sandbox',
          status: 'needs_reauth',
          previous_status: 'active',
          reason: 'invalid_grant',
          message: 'revoked',
        },
      },
      {
        type: 'connection.recovered',
        data: {
          tenant_id: 'atomic',
          connection_id: connectionId,
          environment: 'sandbox',
          status: 'active',
          previous_status: 'needs_reauth',
          replaced_connection_id: null,
        },
      },
    ]);
    await waitFor(
      async () => receiver.accepted('/atomic').length,
      (n) => n >= 2,
    );
  });

  it('settles a due dispatch of a disconnected connection as cancelled, with its dispatch.completed', async () => {
    await createTenant(t, 'gone');
    const connectionId = await connectTenant(t, 'gone');
    const endpoint = await register('gone', receiver.url('/gone'), ['dispatch.completed']);
    await request(t.baseUrl).delete('/v1/tenants/gone/connection').set(op).expect(200);
    // Queued before the disconnect (as the store keeps it), due now: the worker claims it and ends it.
    const id = randomUUID();
    const store = t.app.get(DispatchStore);
    await store.insert(
      {
        id,
        tenant_id: 'gone',
        connection_id: connectionId,
        environment: 'sandbox',
        order_shape: 'single',
        idempotency_key: 'gone-1',
        request_hash: 'f'.repeat(64),
        request: { external_reference: 'late', funding_source_id: 'BALANCE', custom_fields: [[]] },
        upstream_payload: { payment: { funding_source_id: 'BALANCE' } },
        status: 'queued',
        attempts: 0,
        next_attempt_at: null,
        upstream_order_id: null,
        last_error: null,
        response_status: null,
        response_body: null,
        sent_at: null,
        reward_count: 1,
        priority: 0,
      },
      [{ position: 0, external_id: `${id}-r0`, status: 'pending', payload: reward(), attempts: 0 }],
    );
    const [event] = await waitFor(
      async () => receiver.accepted('/gone').map((r) => verified(endpoint.secret, r)),
      (list) => list.length >= 1,
    );
    expect(event.data).toMatchObject({
      dispatch_id: id,
      status: 'cancelled',
      external_reference: 'late',
      error_code: 'dispatch_cancelled',
      counts: { pending: 0, sending: 0, sent: 0, pending_approval: 0, failed: 0, cancelled: 1 },
    });
    const [row] = await sql(`SELECT status, attempts, last_error FROM reward_dispatches WHERE id = $1`, [id]);
    expect(row).toMatchObject({
      status: 'cancelled',
      attempts: 0,
      last_error: { code: 'dispatch_cancelled' },
    });
    await settle(300);
    expect(receiver.accepted('/gone')).toHaveLength(1);
  });

  it('keeps retrying while the endpoint answers 503 and delivers everything once it is back: none lost, none twice', async () => {
    await createTenant(t, 'flaky');
    await connectTenant(t, 'flaky');
    let down = true;
    receiver.answer = (path) => (path === '/flaky' && down ? 503 : 200);
    const endpoint = await register('flaky', receiver.url('/flaky'), ['reward.sent', 'dispatch.completed']);
    for (let i = 0; i < 3; i++) {
      await send(t, 'flaky', `fl-${i}`, {
        rewards: [reward({ recipient: { name: `R${i}`, email: `r${i}@example.com` } })],
      }).expect(201);
    }
    // Every event failed at least twice.
    await waitFor(
      async () =>
        sql(
          `SELECT min(attempts)::int AS a, count(*)::int AS n FROM webhook_outbox WHERE tenant_id = 'flaky'`,
        ),
      (rows) => rows[0].n === 6 && rows[0].a >= 2,
    );
    const failing = await request(t.baseUrl)
      .get(`${api('flaky')}/${endpoint.id}`)
      .set(op)
      .expect(200);
    expect(failing.body).toMatchObject({ status: 'failing', last_error: 'receiver answered 503' });
    expect(failing.body.consecutive_failures).toBeGreaterThanOrEqual(6);
    expect(failing.body.failing_since).not.toBeNull();
    const pending = await request(t.baseUrl)
      .get(`${api('flaky')}/${endpoint.id}/deliveries`)
      .set(op)
      .expect(200);
    for (const d of pending.body.deliveries) {
      expect(d).toMatchObject({ status: 'pending', last_status_code: 503 });
      expect(d.next_attempt_at).not.toBeNull();
    }

    down = false;
    await waitFor(
      async () => new Set(receiver.accepted('/flaky').map((r) => r.id)).size,
      (n) => n >= 6,
    );
    await settle();
    const accepted = receiver.accepted('/flaky');
    expect(accepted).toHaveLength(6); // each event accepted exactly once
    expect(new Set(accepted.map((r) => r.id)).size).toBe(6);
    expect(countBy(accepted.map((r) => verified(endpoint.secret, r).type))).toEqual({
      'reward.sent': 3,
      'dispatch.completed': 3,
    });
    // The ids that failed earlier are the ids that arrived: retries keep their webhook-id.
    const failedIds = new Set(
      receiver
        .all('/flaky')
        .filter((r) => r.answered === 503)
        .map((r) => r.id),
    );
    expect([...failedIds].sort()).toEqual(accepted.map((r) => r.id).sort());
    const healthy = await request(t.baseUrl)
      .get(`${api('flaky')}/${endpoint.id}`)
      .set(op)
      .expect(200);
    expect(healthy.body).toMatchObject({ status: 'active', consecutive_failures: 0, failing_since: null });
    const metrics = await request(t.baseUrl).get('/metrics').expect(200);
    expect(metrics.text).toMatch(/rg_webhook_deliveries_total\{outcome="http_error"\} \d+/);
    expect(metrics.text).toMatch(/rg_webhook_deliveries_total\{outcome="delivered"\} \d+/);
  });

  it('counts a redirect as a failure and never follows it', async () => {
    await createTenant(t, 'redirector');
    await connectTenant(t, 'redirector');
    const previous = receiver.answer;
    receiver.answer = (path) => (path === '/moved' ? 307 : previous(path));
    try {
      const endpoint = await register('redirector', receiver.url('/moved'), ['reward.sent']);
      await send(t, 'redirector', 'rd-1', { rewards: [reward()] }).expect(201);
      const [row] = await waitFor(
        async () =>
          sql(
            `SELECT attempts, last_status_code, last_error, status FROM webhook_outbox WHERE endpoint_id = $1`,
            [endpoint.id],
          ),
        (rows) => rows[0]?.attempts >= 2,
      );
      expect(row).toMatchObject({
        status: 'pending',
        last_status_code: 307,
        last_error: 'receiver answered 307 (a redirect; redirects are not followed)',
      });
      expect(receiver.all('/redirected')).toHaveLength(0);
      await request(t.baseUrl)
        .delete(`${api('redirector')}/${endpoint.id}`)
        .set(op)
        .expect(204);
    } finally {
      receiver.answer = previous;
    }
  });

  it('replays one event with the same webhook-id and body, signed anew', async () => {
    await createTenant(t, 'replayer');
    await connectTenant(t, 'replayer');
    const endpoint = await register('replayer', receiver.url('/replay'), ['reward.sent']);
    await send(t, 'replayer', 'rp-1', { rewards: [reward()] }).expect(201);
    const [original] = await waitFor(
      async () => receiver.accepted('/replay'),
      (list) => list.length === 1,
    );
    const res = await request(t.baseUrl)
      .post(`${api('replayer')}/${endpoint.id}/deliveries/${original.id}/replay`)
      .set(op)
      .expect(202);
    expect(res.body).toMatchObject({ id: original.id, type: 'reward.sent', status: 'pending' });
    const list = await waitFor(
      async () => receiver.accepted('/replay'),
      (l) => l.length === 2,
    );
    const again = list[1];
    expect(again.id).toBe(original.id);
    expect(again.body).toBe(original.body);
    expect(verified(endpoint.secret, again)).toEqual(verified(endpoint.secret, original));
    const unknown = await request(t.baseUrl)
      .post(`${api('replayer')}/${endpoint.id}/deliveries/00000000-0000-4000-8000-000000000000/replay`)
      .set(op)
      .expect(404);
    expect(unknown.body.error.code).toBe('webhook_delivery_not_found');
    const [row] = await sql(`SELECT status, attempts FROM webhook_outbox WHERE id = $1`, [original.id]);
    expect(row).toEqual({ status: 'delivered', attempts: 2 });
  });
});

describe('tenant webhooks: private targets on a gateway that does not allow them', () => {
  // Endpoints registered while allowed (as on a demo gateway), then a gateway without WEBHOOK_ALLOW_PRIVATE_TARGETS
  // started on the same database: it refuses them at registration and, after DNS resolution, at delivery.
  const receiver = new WebhookReceiver();
  let db: { url: string; drop: () => Promise<void> };
  let t: TestApp;
  let spy: jest.SpyInstance;
  let internal: Registered, mixed: Registered, localhost: Registered;
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);

  beforeAll(async () => {
    // Names under the reserved .test TLD, resolved here (not by any real DNS): one to the loopback, one to a public
    // address and the loopback (refused: any internal address is enough).
    const real = dns.promises.lookup;
    spy = jest.spyOn(dns.promises, 'lookup').mockImplementation((async (host: string, options: object) => {
      if (host === 'hooks.internal.test') return [{ address: '127.0.0.1', family: 4 }];
      if (host === 'mixed.internal.test')
        return [
          { address: '93.184.215.14', family: 4 },
          { address: '127.0.0.1', family: 4 },
        ];
      return real(host, options as never);
    }) as never);
    db = await createTestDatabase();
    await receiver.start();
    t = await restartOn(db.url, undefined, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    for (const tenant of ['resolver', 'sneaky']) {
      await createTenant(t, tenant);
      await connectTenant(t, tenant);
    }
    internal = await registerOn(t, 'resolver', `http://hooks.internal.test:${receiver.port}/pinned`, [
      'reward.sent',
    ]);
    mixed = await registerOn(t, 'resolver', `http://mixed.internal.test:${receiver.port}/mixed`, [
      'reward.sent',
    ]);
    localhost = await registerOn(t, 'sneaky', receiver.url('/ssrf', 'localhost'), ['reward.sent']);
    t = await restartOn(db.url, t, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
  });
  afterAll(async () => {
    spy.mockRestore();
    await t.close();
    await db.drop();
    await receiver.stop();
  });

  it('refuses loopback, private, link-local, CGNAT, multicast and unspecified targets at registration', async () => {
    for (const url of [
      'http://127.0.0.1/hook',
      'http://127.1:8080/hook',
      'http://2130706433/hook',
      'http://localhost:3000/hook',
      'http://api.localhost/hook',
      'https://10.0.0.5/hook',
      'https://172.20.1.1/hook',
      'https://192.168.1.10/hook',
      'http://169.254.169.254/latest/meta-data',
      'https://100.64.0.1/hook',
      'https://0.0.0.0/hook',
      'https://224.0.0.1/hook',
      'https://[::1]/hook',
      'https://[fd00::1]/hook',
      'https://[fe80::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::]/hook',
    ]) {
      const res = await request(t.baseUrl)
        .post(api('sneaky'))
        .set(op)
        .send({ url, events: ['*'] });
      expect({ url, status: res.status }).toEqual({ url, status: 400 });
      expect(res.body.error.details[0].field).toBe('url');
    }
    // A public address is fine (an IP literal: no DNS needed to decide).
    const pub = await registerOn(t, 'sneaky', 'https://93.184.215.14/hook', ['reward.sent']);
    await request(t.baseUrl)
      .delete(`${api('sneaky')}/${pub.id}`)
      .set(op)
      .expect(204);
  });

  it('refuses localhost at delivery', async () => {
    await send(t, 'sneaky', 'ss-1', { rewards: [reward()] }).expect(201);
    const [row] = await waitFor(
      async () =>
        sql(`SELECT attempts, last_error, status FROM webhook_outbox WHERE endpoint_id = $1`, [localhost.id]),
      (rows) => rows.length === 1 && rows[0].attempts >= 1 && rows[0].last_error !== null,
    );
    expect(row.status).toBe('pending');
    expect(row.last_error).toMatch(
      /localhost resolves to (127\.0\.0\.1|::1).*refused|localhost is a loopback/,
    );
    expect(receiver.all('/ssrf')).toHaveLength(0);
    const metrics = await request(t.baseUrl).get('/metrics').expect(200);
    expect(metrics.text).toMatch(/rg_webhook_deliveries_total\{outcome="forbidden_target"\} [1-9]/);
    await request(t.baseUrl)
      .delete(`${api('sneaky')}/${localhost.id}`)
      .set(op)
      .expect(204);
  });

  it('checks every address a name resolves to at delivery, and connects only to the checked address', async () => {
    await send(t, 'resolver', 'res-1', { rewards: [reward()] }).expect(201);
    const rows = await waitFor(
      async () =>
        sql(
          `SELECT e.url, o.attempts, o.last_error, o.status FROM webhook_outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id
            WHERE o.tenant_id = 'resolver' ORDER BY e.url`,
        ),
      (r) => r.length === 2 && r.every((x) => x.attempts >= 1 && x.last_error !== null),
    );
    expect(rows[0].last_error).toMatch(/hooks\.internal\.test resolves to 127\.0\.0\.1, .*refused/);
    expect(rows[1].last_error).toMatch(/mixed\.internal\.test resolves to 127\.0\.0\.1, .*refused/);
    expect(rows.every((r) => r.status === 'pending')).toBe(true);
    expect(receiver.all('/pinned')).toHaveLength(0);
    expect(receiver.all('/mixed')).toHaveLength(0);
    const metrics = await request(t.baseUrl).get('/metrics').expect(200);
    expect(metrics.text).toMatch(/rg_webhook_deliveries_total\{outcome="forbidden_target"\} [1-9]/);
    const view = await request(t.baseUrl)
      .get(`${api('resolver')}/${internal.id}`)
      .set(op)
      .expect(200);
    expect(view.body.last_error).toMatch(/refused/);
    // Allowed again: the retry connects to the address the lookup returned — the name exists nowhere else, so its
    // arrival shows the socket went to the checked address.
    t = await restartOn(db.url, t, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    await request(t.baseUrl)
      .delete(`${api('resolver')}/${mixed.id}`)
      .set(op)
      .expect(204);
    const [arrived] = await waitFor(
      async () => receiver.accepted('/pinned'),
      (l) => l.length === 1,
    );
    expect(verified(internal.secret, arrived).type).toBe('reward.sent');
  });
});

describe('tenant webhooks: giving up, and disabling an endpoint that keeps failing', () => {
  let db: { url: string; drop: () => Promise<void> };
  let t: TestApp;
  const receiver = new WebhookReceiver();
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);

  beforeAll(async () => {
    db = await createTestDatabase();
    // A small give-up window for the first test; the second starts the gateway again with its own settings.
    t = await restartOn(db.url, undefined, {
      WEBHOOK_RETRY_SCHEDULE_MS: '100',
      WEBHOOK_GIVE_UP_AFTER_MS: '600',
    });
    await receiver.start();
    receiver.answer = (path) => (path.startsWith('/broken') ? 500 : 200);
    await createTenant(t, 'failing');
    await connectTenant(t, 'failing');
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
    await receiver.stop();
  });

  it('marks an event failed once WEBHOOK_GIVE_UP_AFTER_MS has passed', async () => {
    const endpoint = (
      await request(t.baseUrl)
        .post(api('failing'))
        .set(op)
        .send({ url: receiver.url('/broken/give-up'), events: ['reward.sent'] })
        .expect(201)
    ).body;
    await send(t, 'failing', 'gu-1', { rewards: [reward()] }).expect(201);
    const [row] = await waitFor(
      async () =>
        sql(`SELECT status, attempts, last_status_code FROM webhook_outbox WHERE endpoint_id = $1`, [
          endpoint.id,
        ]),
      (rows) => rows[0]?.status === 'failed',
    );
    expect(row.attempts).toBeGreaterThan(1);
    expect(row.last_status_code).toBe(500);
    const attempts = receiver.all('/broken/give-up').length;
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.all('/broken/give-up')).toHaveLength(attempts); // no attempt after giving up
    const metrics = await request(t.baseUrl).get('/metrics').expect(200);
    expect(metrics.text).toMatch(/rg_webhook_deliveries_total\{outcome="gave_up"\} [1-9]/);
    await request(t.baseUrl)
      .delete(`${api('failing')}/${endpoint.id}`)
      .set(op)
      .expect(204);
  });

  it('disables an endpoint failing for WEBHOOK_DISABLE_AFTER_MS, says so, and can be enabled and replayed', async () => {
    t = await restartOn(db.url, t, { WEBHOOK_RETRY_SCHEDULE_MS: '100', WEBHOOK_DISABLE_AFTER_MS: '1500' });
    const endpoint = (
      await request(t.baseUrl)
        .post(api('failing'))
        .set(op)
        .send({ url: receiver.url('/broken/disable'), events: ['*'] })
        .expect(201)
    ).body;
    await send(t, 'failing', 'dis-1', { rewards: [reward()] }).expect(201);
    const disabled = await waitFor(
      async () =>
        (
          await request(t.baseUrl)
            .get(`${api('failing')}/${endpoint.id}`)
            .set(op)
        ).body,
      (body) => body.status === 'disabled',
    );
    expect(disabled.disabled_at).not.toBeNull();
    expect(disabled.disabled_reason).toMatch(
      /^failing continuously since \S+ \(\d+ consecutive failed attempts\); last error: receiver answered 500$/,
    );
    expect(disabled.consecutive_failures).toBeGreaterThan(3);
    // Nothing more goes out; what was pending ended failed.
    const deliveries = (
      await request(t.baseUrl)
        .get(`${api('failing')}/${endpoint.id}/deliveries`)
        .set(op)
    ).body.deliveries as { id: string; status: string }[];
    expect(deliveries.length).toBe(2);
    expect(deliveries.every((d) => d.status === 'failed')).toBe(true);
    const attempts = receiver.all('/broken/disable').length;
    // New events do not queue for a disabled endpoint.
    await send(t, 'failing', 'dis-2', { rewards: [reward()] }).expect(201);
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.all('/broken/disable')).toHaveLength(attempts);
    expect(
      (await sql(`SELECT count(*)::int AS n FROM webhook_outbox WHERE endpoint_id = $1`, [endpoint.id]))[0].n,
    ).toBe(2);
    const refused = await request(t.baseUrl)
      .post(`${api('failing')}/${endpoint.id}/deliveries/${deliveries[0].id}/replay`)
      .set(op)
      .expect(409);
    expect(refused.body.error.code).toBe('webhook_endpoint_disabled');

    // The ops dashboard's view.
    const failing = await t.app.get(WebhookStore).failingEndpoints(10);
    expect(failing).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          endpoint_id: endpoint.id,
          tenant_id: 'failing',
          url: endpoint.url,
          disabled: true,
        }),
      ]),
    );

    // The receiver is fixed; the tenant enables the endpoint and replays what it missed.
    receiver.answer = () => 200;
    const enabled = await request(t.baseUrl)
      .post(`${api('failing')}/${endpoint.id}/enable`)
      .set(op)
      .expect(200);
    expect(enabled.body).toMatchObject({ status: 'active', disabled_at: null, consecutive_failures: 0 });
    for (const d of deliveries)
      await request(t.baseUrl)
        .post(`${api('failing')}/${endpoint.id}/deliveries/${d.id}/replay`)
        .set(op)
        .expect(202);
    const arrived = await waitFor(
      async () => receiver.accepted('/broken/disable'),
      (list: ReceivedWebhook[]) => list.length === 2,
    );
    expect(arrived.map((r) => r.id).sort()).toEqual(deliveries.map((d) => d.id).sort());
    expect(await t.app.get(WebhookStore).failingEndpoints(10)).toEqual([]);
  });
});
