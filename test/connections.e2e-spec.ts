import request from 'supertest';
import type { TestApp } from './support/app';
import { sqlOn } from './support/database';
import { startTestApp } from './support/app';
import {
  RETURN_URL,
  approve,
  connectTenant,
  control,
  createTenant,
  op,
  startConnect,
} from './support/connect';

describe('connections: the connect flow against the sandbox over HTTP', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.close();
  });
  beforeEach(async () => {
    await control(t, '/reset');
  });

  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);

  it('walks connect session → page → authorize → consent → callback → active', async () => {
    await createTenant(t, 'happy');
    const session = await request(t.baseUrl)
      .post('/v1/tenants/happy/connect-sessions')
      .set(op)
      .send({ return_url: RETURN_URL })
      .expect(201);
    expect(session.body).toMatchObject({
      environment: 'sandbox',
      scopes: ['default'],
      connect_url: expect.stringMatching(/\/connect\/[A-Za-z0-9_-]{43}$/),
    });
    const connectPath = new URL(session.body.connect_url).pathname;
    const page = await request(t.baseUrl).get(connectPath).expect(200);
    expect(page.text).toContain('Tenant happy');
    expect(page.text).toContain('Connect rewards account');
    expect(page.text).toContain('sandbox');

    const authorize = await request(t.baseUrl).get(`${connectPath}/authorize`).expect(302);
    const upstream = new URL(authorize.headers.location);
    expect(`${upstream.origin}${upstream.pathname}`).toBe(`${t.baseUrl}/sandbox/oauth/authorize`);
    const q = upstream.searchParams;
    expect(q.get('client_id')).toBe(t.config.rewards.sandbox?.clientId);
    expect(q.get('redirect_uri')).toBe(`${t.baseUrl}/oauth/callback`);
    expect(q.get('response_type')).toBe('code');
    expect(q.get('scope')).toBe('default');
    expect(q.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/); // 256 bits
    expect(q.get('code_challenge_method')).toBe('S256');
    const cookieHeader = (authorize.headers['set-cookie'] as unknown as string[])[0];
    expect(cookieHeader).toMatch(/HttpOnly/i);
    expect(cookieHeader).toMatch(/SameSite=Lax/i);

    const callback = await approve(t, upstream);
    const done = await request(t.baseUrl).get(callback).set('Cookie', cookieHeader.split(';')[0]).expect(302);
    expect(done.headers.location).toBe(`${RETURN_URL}?status=connected`);

    const connection = await request(t.baseUrl).get('/v1/tenants/happy/connection').set(op).expect(200);
    expect(connection.body).toMatchObject({
      status: 'active',
      environment: 'sandbox',
      scopes: ['default'],
      consecutive_failures: 0,
      last_error: null,
    });
    expect(JSON.stringify(connection.body)).not.toMatch(/sbx_(at|rt)_/);
    const events = await sql(`SELECT type FROM connection_events WHERE connection_id = $1`, [
      connection.body.id,
    ]);
    expect(events.map((e) => e.type)).toEqual(['connected']);
    // The connect link is one-time.
    await request(t.baseUrl).get(connectPath).expect(410);
  });

  it('sends the user back with status=error&error=access_denied when consent is denied, storing nothing', async () => {
    await createTenant(t, 'denier');
    const { cookie, upstream } = await startConnect(t, 'denier');
    const callback = await approve(t, upstream, 'deny');
    const done = await request(t.baseUrl).get(callback).set('Cookie', cookie).expect(302);
    expect(done.headers.location).toBe(`${RETURN_URL}?status=error&error=access_denied`);
    await request(t.baseUrl).get('/v1/tenants/denier/connection').set(op).expect(404);
  });

  it('shows a result page when the session has no return_url', async () => {
    await createTenant(t, 'pageonly');
    const { cookie, upstream } = await startConnect(t, 'pageonly', {});
    const callback = await approve(t, upstream);
    const done = await request(t.baseUrl).get(callback).set('Cookie', cookie).expect(200);
    expect(done.text).toContain('Rewards account connected');
  });

  it('rejects a replayed state, a callback from another browser, a missing code and an unknown state', async () => {
    await createTenant(t, 'attacked');
    const first = await startConnect(t, 'attacked');
    const callback = await approve(t, first.upstream);
    const otherBrowser = await request(t.baseUrl).get(callback).expect(302);
    expect(otherBrowser.headers.location).toContain('error=browser_mismatch');
    const replay = await request(t.baseUrl).get(callback).set('Cookie', first.cookie).expect(302);
    expect(replay.headers.location).toContain('error=state_replayed');
    await request(t.baseUrl).get('/v1/tenants/attacked/connection').set(op).expect(404);

    const second = await startConnect(t, 'attacked');
    const state = second.upstream.searchParams.get('state') as string;
    const noCode = await request(t.baseUrl)
      .get(`/oauth/callback?state=${state}`)
      .set('Cookie', second.cookie)
      .expect(302);
    expect(noCode.headers.location).toContain('error=missing_code');

    const unknown = await request(t.baseUrl)
      .get('/oauth/callback?state=forged-state-value-0000000000&code=x')
      .expect(400);
    expect(unknown.text).toContain('not one we started');
  });

  it('rejects an expired state', async () => {
    await createTenant(t, 'slow');
    const { cookie, upstream } = await startConnect(t, 'slow');
    const callback = await approve(t, upstream);
    await sql(`UPDATE oauth_states SET expires_at = now() - interval '1 second'`);
    const done = await request(t.baseUrl).get(callback).set('Cookie', cookie).expect(302);
    expect(done.headers.location).toContain('error=state_expired');
  });

  it('ends on a clear error when the token endpoint fails, with nothing half-stored', async () => {
    await createTenant(t, 'tokenfail');
    const { cookie, upstream } = await startConnect(t, 'tokenfail');
    const callback = await approve(t, upstream);
    await control(t, '/faults', { route: 'token', status: 503, times: 1 });
    const done = await request(t.baseUrl).get(callback).set('Cookie', cookie).expect(302);
    expect(done.headers.location).toContain('error=token_exchange_failed');
    await request(t.baseUrl).get('/v1/tenants/tokenfail/connection').set(op).expect(404);
    expect(
      await sql(
        `SELECT * FROM grants g JOIN connections c ON c.id = g.connection_id WHERE c.tenant_id = 'tokenfail'`,
      ),
    ).toEqual([]);
  });

  it('validates connect sessions: return_url on the allow-list, known scopes and environment', async () => {
    await createTenant(t, 'strict');
    const bad = await request(t.baseUrl)
      .post('/v1/tenants/strict/connect-sessions')
      .set(op)
      .send({ return_url: 'https://evil.example.com/' })
      .expect(422);
    expect(bad.body.error.code).toBe('return_url_not_allowed');
    const scopes = await request(t.baseUrl)
      .post('/v1/tenants/strict/connect-sessions')
      .set(op)
      .send({ scopes: ['admin'] })
      .expect(400);
    expect(scopes.body.error.details[0].field).toBe('scopes');
    const env = await request(t.baseUrl)
      .post('/v1/tenants/strict/connect-sessions')
      .set(op)
      .send({ environment: 'production' })
      .expect(422);
    expect(env.body.error.code).toBe('environment_not_configured');
    await request(t.baseUrl).get('/connect/not-a-token').expect(404);
  });

  it('replaces the previous connection on reconnect, and disconnects (grant deleted, event)', async () => {
    await createTenant(t, 'again');
    const first = await connectTenant(t, 'again');
    const second = await connectTenant(t, 'again');
    expect(second).not.toBe(first);
    const rows = await sql(
      `SELECT id, status FROM connections WHERE tenant_id = 'again' ORDER BY connected_at`,
    );
    expect(rows.map((r) => r.status)).toEqual(['disconnected', 'active']);
    expect(await sql(`SELECT connection_id FROM grants WHERE connection_id = $1`, [first])).toEqual([]);
    const gone = await request(t.baseUrl).delete('/v1/tenants/again/connection').set(op).expect(200);
    expect(gone.body.status).toBe('disconnected');
    expect(await sql(`SELECT 1 FROM grants WHERE connection_id = $1`, [second])).toEqual([]);
    const events = await sql(`SELECT type FROM connection_events WHERE connection_id = $1 ORDER BY id`, [
      second,
    ]);
    expect(events.map((e) => e.type)).toEqual(['connected', 'disconnected']);
  });

  it('lets a tenant key create connect sessions and read the connection for its own tenant only', async () => {
    await createTenant(t, 'self-serve');
    await createTenant(t, 'neighbour');
    const key = (
      await request(t.baseUrl)
        .post('/v1/tenants/self-serve/api-keys')
        .set(op)
        .send({ name: 'platform' })
        .expect(201)
    ).body.key;
    const own = { Authorization: `Bearer ${key}` };
    await request(t.baseUrl).post('/v1/tenants/self-serve/connect-sessions').set(own).send({}).expect(201);
    await request(t.baseUrl).post('/v1/tenants/neighbour/connect-sessions').set(own).send({}).expect(404);
    await request(t.baseUrl).get('/v1/tenants/neighbour/connection').set(own).expect(404);
    const none = await request(t.baseUrl).get('/v1/tenants/self-serve/connection').set(own).expect(404);
    expect(none.body.error.code).toBe('connection_not_found');
  });

  it('keeps tokens out of the database in plain text, out of responses and out of logs', async () => {
    await createTenant(t, 'secretive');
    await connectTenant(t, 'secretive');
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    expect(stats.grants.length).toBeGreaterThan(0);
    const dump =
      JSON.stringify(await sql(`SELECT * FROM grants`)) +
      JSON.stringify(await sql(`SELECT * FROM oauth_states`));
    expect(dump).not.toMatch(/sbx_(at|rt)_/);
    expect(t.logs.join('\n')).not.toMatch(/sbx_(at|rt|code)_/);
    expect(t.logs.join('\n')).not.toContain(t.config.rewards.sandbox?.clientSecret);
  });
});
