import { Client } from 'pg';
import request from 'supertest';
import { AppError } from '../src/common/app-error';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import { RewardsApi } from '../src/token-vault/rewards-api.service';
import type { TestApp } from './support/app';
import { sqlOn } from './support/database';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';

const LOCK_WAIT_MS = 1_000;

describe('refresh failures: transient, unknown outcome, backoff', () => {
  let t: TestApp;
  let provider: AccessTokenProvider;
  beforeAll(async () => {
    t = await startTestApp();
    provider = t.app.get(AccessTokenProvider);
  });
  afterAll(async () => {
    await t.close();
  });
  beforeEach(async () => {
    await control(t, '/reset');
    await control(t, '/settings', { access_token_ttl_seconds: 2 });
  });

  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const tokenCalls = async () =>
    (await request(t.baseUrl).get('/sandbox/__control/stats')).body.calls.token as number;
  const codeOf = async (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (e: unknown) => (e instanceof AppError ? e.code : String(e)),
    );
  const expire = () => new Promise((r) => setTimeout(r, 2_100));

  it('keeps the old refresh token on a 5xx, cools down without token calls, and recovers', async () => {
    await createTenant(t, 'flaky');
    const id = await connectTenant(t, 'flaky');
    const first = await provider.getAccessToken(id);
    await expire();
    await control(t, '/faults', { route: 'token', status: 503, times: 1 });
    expect(await codeOf(provider.getAccessToken(id))).toBe('connection_refresh_failed');
    const calls = await tokenCalls();
    expect(await codeOf(provider.getAccessToken(id))).toBe('connection_refresh_backoff');
    expect(await tokenCalls()).toBe(calls); // the cooldown answered without another token call
    const during = await request(t.baseUrl).get('/v1/tenants/flaky/connection').set(op).expect(200);
    expect(during.body).toMatchObject({
      status: 'active',
      consecutive_failures: 1,
      last_error: { code: 'refresh_transient' },
    });
    await sql(`UPDATE connections SET backoff_until = now() WHERE id = $1`, [id]);
    const recovered = await provider.getAccessToken(id);
    expect(recovered.generation).toBe(first.generation + 1);
    const after = await request(t.baseUrl).get('/v1/tenants/flaky/connection').set(op).expect(200);
    expect(after.body).toMatchObject({
      status: 'active',
      consecutive_failures: 0,
      last_error: null,
      refresh_count: 1,
    });
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    expect(stats.grants[0].revoked).toBe(false);
  });

  it('ends in needs_reauth with a clear event when a refresh timed out after the service did the work — no loop', async () => {
    await createTenant(t, 'unlucky');
    const id = await connectTenant(t, 'unlucky');
    await provider.getAccessToken(id);
    await expire();
    await control(t, '/faults', { route: 'token', drop_after_work: true, times: 1 });
    expect(await codeOf(provider.getAccessToken(id))).toBe('connection_refresh_failed');
    await sql(`UPDATE connections SET backoff_until = now() WHERE id = $1`, [id]);
    expect(await codeOf(provider.getAccessToken(id))).toBe('connection_not_active');
    const calls = await tokenCalls();
    expect(await codeOf(provider.getAccessToken(id))).toBe('connection_not_active');
    expect(await tokenCalls()).toBe(calls); // needs_reauth: no more token calls
    const connection = await request(t.baseUrl).get('/v1/tenants/unlucky/connection').set(op).expect(200);
    expect(connection.body.status).toBe('needs_reauth');
    expect(connection.body.last_error.message).toMatch(/timed out after it was sent/);
    const events = await sql(
      `SELECT type, detail FROM connection_events WHERE connection_id = $1 ORDER BY id`,
      [id],
    );
    expect(events.map((e) => e.type)).toEqual(['connected', 'refresh_failed', 'needs_reauth']);
    expect(events[2].detail.after_unknown_outcome).toBe(true);
  });

  it('uses a 2-second token instead of refreshing it on every call', async () => {
    await createTenant(t, 'short');
    const id = await connectTenant(t, 'short');
    const before = await tokenCalls();
    for (let i = 0; i < 20; i++) await provider.getAccessToken(id);
    expect(await tokenCalls()).toBe(before);
  });

  it('re-reads or force-refreshes once after an upstream 401', async () => {
    await createTenant(t, 'revoked');
    const id = await connectTenant(t, 'revoked');
    const token = await provider.getAccessToken(id);
    const fresh = await provider.afterUnauthorized(id, token);
    expect(fresh.generation).toBe(token.generation + 1);
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    await request(t.baseUrl).post(`/sandbox/__control/grants/${stats.grants[0].id}/revoke`).send({});
    expect(await codeOf(provider.afterUnauthorized(id, fresh))).toBe('connection_not_active');
    expect((await request(t.baseUrl).get('/v1/tenants/revoked/connection').set(op)).body.status).toBe(
      'needs_reauth',
    );
  });

  it('a valid token refused alone: one forced refresh and the call goes through; the connection stays active', async () => {
    await control(t, '/settings', { access_token_ttl_seconds: 60 });
    await createTenant(t, 'one-refusal');
    const id = await connectTenant(t, 'one-refusal');
    await provider.getAccessToken(id);
    const before = tokenCalls();
    await control(t, '/faults', { route: 'organizations', status: 401, times: 1 });
    expect(await t.app.get(RewardsApi).forConnection(id).probe()).not.toBeNull();
    expect((await tokenCalls()) - (await before)).toBe(1);
    expect((await request(t.baseUrl).get('/v1/tenants/one-refusal/connection').set(op)).body.status).toBe(
      'active',
    );
  });

  it('a fresh, unexpired token refused too: the service refuses the grant, the connection needs a new consent', async () => {
    await control(t, '/settings', { access_token_ttl_seconds: 60 });
    await createTenant(t, 'refused-grant');
    const id = await connectTenant(t, 'refused-grant');
    await provider.getAccessToken(id);
    const before = tokenCalls();
    await control(t, '/faults', { route: 'organizations', status: 401 });
    expect(await codeOf(t.app.get(RewardsApi).forConnection(id).probe())).toBe('connection_not_active');
    await request(t.baseUrl).delete('/sandbox/__control/faults');
    expect((await tokenCalls()) - (await before)).toBe(1);
    expect((await request(t.baseUrl).get('/v1/tenants/refused-grant/connection').set(op)).body.status).toBe(
      'needs_reauth',
    );
  });
});

describe('refresh edge cases: a stalled lock holder, a server that does not rotate', () => {
  let t: TestApp;
  let provider: AccessTokenProvider;
  beforeAll(async () => {
    // How long a caller waits for another instance's refresh lock (default 5 s): the lock test below waits it out.
    t = await startTestApp({ TOKEN_REFRESH_LOCK_TIMEOUT_MS: String(LOCK_WAIT_MS) });
    provider = t.app.get(AccessTokenProvider);
    await control(t, '/settings', { access_token_ttl_seconds: 2 });
  });
  afterAll(async () => {
    await t.close();
  });
  const codeOf = async (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (e: unknown) => (e instanceof AppError ? e.code : String(e)),
    );

  it('answers refresh_lock_timeout (retryable) while another instance holds the lock, and never refreshes without it', async () => {
    await createTenant(t, 'stalled');
    const id = await connectTenant(t, 'stalled');
    await new Promise((r) => setTimeout(r, 2_100));
    const stalled = new Client({ connectionString: t.databaseUrl });
    await stalled.connect();
    await stalled.query('BEGIN');
    await stalled.query('SELECT * FROM grants WHERE connection_id = $1 FOR UPDATE', [id]);
    const before = (await request(t.baseUrl).get('/sandbox/__control/stats')).body.calls.token;
    const started = Date.now();
    expect(await codeOf(provider.getAccessToken(id))).toBe('refresh_lock_timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(LOCK_WAIT_MS * 0.9); // it waited the whole lock timeout
    expect((await request(t.baseUrl).get('/sandbox/__control/stats')).body.calls.token).toBe(before);
    await stalled.query('ROLLBACK');
    await stalled.end();
    expect(await codeOf(provider.getAccessToken(id))).toBe('ok');
    const connection = await request(t.baseUrl).get('/v1/tenants/stalled/connection').set(op).expect(200);
    expect(connection.body).toMatchObject({ status: 'active', consecutive_failures: 0 });
    expect(connection.body.last_used_at).not.toBeNull();
  }, 20_000);

  it('keeps the old refresh token when a refresh response carries none', async () => {
    await createTenant(t, 'nonrotating');
    const id = await connectTenant(t, 'nonrotating');
    await control(t, '/settings', { rotate_refresh_tokens: false });
    for (let i = 0; i < 2; i++) {
      await new Promise((r) => setTimeout(r, 2_100));
      expect(await codeOf(provider.getAccessToken(id))).toBe('ok');
    }
    await control(t, '/settings', { rotate_refresh_tokens: true });
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    expect(stats.grants.at(-1)).toMatchObject({ refresh_count: 2, revoked: false });
  }, 20_000);
});
