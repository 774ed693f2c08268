import { randomBytes } from 'node:crypto';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestAppOn } from './support/app';
import { op } from './support/connect';
import { createTestDatabase, sqlOn } from './support/database';
import type { RunningSandbox } from './support/sandbox';
import { CLIENT, startSandbox } from './support/sandbox';
import { reward, waitFor } from './support/send';

/** Two gateway instances (separate apps, caches and listeners) on one Postgres and one rewards service. */
describe('several instances on one Postgres', () => {
  let db: { url: string; drop: () => Promise<void> };
  let sandbox: RunningSandbox;
  let a: TestApp;
  let b: TestApp;
  const sendOn = (t: TestApp, key: string, body: Record<string, unknown>, auth = op) =>
    request(t.baseUrl).post('/v1/tenants/multi/rewards').set(auth).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    db = await createTestDatabase();
    sandbox = await startSandbox();
    const env = {
      VAULT_KEYS: `multi:${randomBytes(32).toString('base64')}`,
      REWARDS_SANDBOX_BASE_URL: sandbox.baseUrl,
      REWARDS_SANDBOX_CLIENT_ID: CLIENT.clientId,
      REWARDS_SANDBOX_CLIENT_SECRET: CLIENT.clientSecret,
      DISPATCH_RETRY_BASE_MS: '1500',
      DISPATCH_POLL_MS: '100',
      OPS_PROBE_INTERVAL_MS: '0',
      LOG_LEVEL: 'error',
    };
    a = await startTestAppOn(db.url, env);
    b = await startTestAppOn(db.url, env);
    sandbox.state.clients
      .get(CLIENT.clientId)
      ?.redirectUris.push(`${a.baseUrl}/oauth/callback`, `${b.baseUrl}/oauth/callback`);
    sandbox.state.settings.autoApprove = true;
    await request(a.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .send({ id: 'multi', name: 'Multi', return_urls: ['https://platform.example.com/done'] })
      .expect(201);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await sandbox.close();
    await db.drop();
  });

  async function connect(through: TestApp): Promise<void> {
    const session = await request(through.baseUrl)
      .post('/v1/tenants/multi/connect-sessions')
      .set(op)
      .send({})
      .expect(201);
    const authorize = await request(through.baseUrl)
      .get(`${new URL(session.body.connect_url as string).pathname}/authorize`)
      .expect(302);
    const cookie = (authorize.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
    const consent = await fetch(authorize.headers.location, { redirect: 'manual' });
    const callback = new URL(consent.headers.get('location') as string);
    const page = await request(through.baseUrl)
      .get(`${callback.pathname}${callback.search}`)
      .set('Cookie', cookie)
      .expect(200);
    expect(page.text).toMatch(/connected/i);
  }

  it('cancels a dispatch queued on A when the tenant disconnects through B: nothing is sent, and A forgets the connection at once', async () => {
    await connect(a);
    // A knows the connection (caches warm): one send goes through.
    await sendOn(a, 'warm', {
      rewards: [reward({ recipient: { name: 'Warm', email: 'warm@example.com' } })],
    }).expect(201);
    sandbox.faults.rules.push({ route: 'orders', status: 503, times: 1 });
    const queued = await sendOn(a, 'queued', {
      rewards: [reward({ recipient: { name: 'Queued', email: 'queued@example.com' } })],
    }).expect(202);
    expect(queued.body.status).toBe('queued');
    await request(b.baseUrl).delete('/v1/tenants/multi/connection').set(op).expect(200);
    // A has heard of the disconnect (NOTIFY): its live-connection cache no longer holds it, and a send says so.
    const started = Date.now();
    await waitFor(
      () => sendOn(a, `after-${Date.now()}`, { rewards: [reward()] }),
      (r) => r.status === 409 && r.body.error.code === 'connection_not_active',
      1_000,
    );
    expect(Date.now() - started).toBeLessThan(1_000);
    const cancelled = await waitFor(
      () => request(a.baseUrl).get(`/v1/tenants/multi/dispatches/${queued.body.id}`).set(op),
      (r) => r.body.status === 'cancelled',
      10_000,
    );
    expect(cancelled.body.rewards[0]).toMatchObject({
      status: 'cancelled',
      error: { code: 'dispatch_cancelled' },
    });
    const orders = [...sandbox.state.accounts.get('acc_demo')!.orders.values()];
    expect(
      orders.filter((o) => o.rewards.some((r) => r.recipient.email === 'queued@example.com')),
    ).toHaveLength(0);
    const replay = await sendOn(b, 'queued', {
      rewards: [reward({ recipient: { name: 'Queued', email: 'queued@example.com' } })],
    }).expect(409);
    expect(replay.body.error.code).toBe('dispatch_cancelled');
  });

  it('refuses a revoked API key on every instance within 1 s', async () => {
    const created = await request(a.baseUrl)
      .post('/v1/tenants/multi/api-keys')
      .set(op)
      .send({ name: 'svc' })
      .expect(201);
    const auth = { Authorization: `Bearer ${created.body.key as string}` };
    // Both instances have authenticated (and cached) the key.
    await request(a.baseUrl).get('/v1/tenants/multi').set(auth).expect(200);
    await request(b.baseUrl).get('/v1/tenants/multi').set(auth).expect(200);
    await request(a.baseUrl)
      .delete(`/v1/tenants/multi/api-keys/${created.body.id as string}`)
      .set(op)
      .expect(204);
    const revokedAt = Date.now();
    await request(a.baseUrl).get('/v1/tenants/multi').set(auth).expect(401);
    await waitFor(
      () => request(b.baseUrl).get('/v1/tenants/multi').set(auth),
      (r) => r.status === 401,
      1_000,
    );
    expect(Date.now() - revokedAt).toBeLessThan(1_000);
  });

  it('purges expired connect sessions, OAuth states and old events, one instance at a time', async () => {
    await sqlOn(db.url, `UPDATE connect_sessions SET expires_at = now() - interval '2 days'`);
    await sqlOn(db.url, `UPDATE oauth_states SET expires_at = now() - interval '2 hours'`);
    await sqlOn(
      db.url,
      `UPDATE connection_events SET at = now() - interval '100 days' WHERE type = 'connected'`,
    );
    const { RetentionJob } = await import('../src/retention/retention');
    const [first, second] = await Promise.all([a.app.get(RetentionJob).run(), b.app.get(RetentionJob).run()]);
    const ran = [first, second].filter((r) => r !== null);
    expect(ran.length).toBeGreaterThanOrEqual(1);
    const counts = (
      await sqlOn(
        db.url,
        `SELECT (SELECT count(*)::int FROM connect_sessions) AS s, (SELECT count(*)::int FROM oauth_states) AS o, (SELECT count(*)::int FROM connection_events WHERE type = 'connected') AS e`,
      )
    )[0];
    expect(counts).toEqual({ s: 0, o: 0, e: 0 });
  });
});
