import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { EMBEDDED_SANDBOX_CLIENT } from '../src/config/app-config';
import type { Sandbox, SandboxOptions } from '../src/sandbox/sandbox.app';
import { createSandbox } from '../src/sandbox/sandbox.app';
import { UNAUTHENTICATED_MAP_CAP } from '../src/sandbox/sandbox.state';
import type { TestApp } from './support/app';
import { startTestApp, startTestAppOn } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { createTestDatabase, sqlOn } from './support/database';
import { CLIENT, connect, get, post } from './support/sandbox';
import { DEMO_API_KEY, bearer, singleOrder } from './support/sandbox-orders';
import { reward, send, waitFor } from './support/send';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const stats = async (t: TestApp): Promise<Json> =>
  (await request(t.baseUrl).get('/sandbox/__control/stats').expect(200)).body;
const controlOrders = async (t: TestApp): Promise<Json[]> =>
  (await request(t.baseUrl).get('/sandbox/__control/orders').expect(200)).body.orders;

describe('the sandbox mounted in the gateway keeps its state in Postgres across a restart', () => {
  let db: { url: string; drop: () => Promise<void> };
  let env: Record<string, string>;
  let first: TestApp | undefined;
  let second: TestApp | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    // Both instances: the same vault key and the default demo app (each listens on a port of its own: the
    // sandbox takes the redirect URI from the configuration, not from what it stored).
    env = {
      VAULT_KEYS: `persist:${randomBytes(32).toString('base64')}`,
      OPS_PROBE_INTERVAL_MS: '0',
      DISPATCH_RETRY_BASE_MS: '100',
      DISPATCH_POLL_MS: '100',
    };
  });
  afterAll(async () => {
    await first?.close().catch(() => undefined);
    await second?.close().catch(() => undefined);
    await db.drop();
  });

  it('a connected tenant sends again after the restart: connection active, earlier orders listed, a token refresh works', async () => {
    first = await startTestAppOn(db.url, env);
    expect(first.config.rewards.sandbox).toMatchObject({
      embedded: true,
      clientId: EMBEDDED_SANDBOX_CLIENT.clientId,
    });
    await createTenant(first, 'keeper');
    const connectionId = await connectTenant(first, 'keeper');
    const sent = await send(first, 'keeper', 'before-restart', {
      funding_source_id: 'FSDEMOMAIN',
      rewards: [reward()],
    }).expect(201);
    expect(sent.body.status).toBe('sent');
    // Hostile text the jsonb column cannot hold as it is (NUL, a lone surrogate), sent straight to the sandbox.
    const oddName = 'Nul\u0000 and lone \ud800 surrogate';
    const odd = await request(first.baseUrl)
      .post('/sandbox/api/v2/orders')
      .set(bearer(DEMO_API_KEY))
      .send(
        singleOrder(
          { external_id: 'odd-\u0000-id' },
          { recipient: { name: oddName, email: 'odd@example.com' } },
        ),
      )
      .expect(200);
    await control(first, '/settings', { code_ttl_seconds: 300 });
    const ordersBefore = await controlOrders(first);
    expect(ordersBefore).toHaveLength(2);
    const grantBefore = (await stats(first)).grants[0];
    expect(grantBefore).toMatchObject({ revoked: false, refresh_count: 0 });

    // Saved without waiting for the stop (debounced, within about a second); never a token or code in plain text.
    const row = await waitFor(
      () =>
        sqlOn(
          db.url,
          `SELECT state::text AS state, (state->'settings'->>'codeTtlSeconds')::int AS code_ttl, saved_at FROM sandbox_state`,
        ),
      (rows) => rows.length === 1 && rows[0].code_ttl === 300,
      5_000,
    );
    expect(row[0].saved_at).toBeInstanceOf(Date);
    expect(row[0].state).not.toMatch(/sbx_(at|rt|code)_/);

    await first.close();
    first = undefined;

    second = await startTestAppOn(db.url, env);
    const connection = await request(second.baseUrl).get('/v1/tenants/keeper/connection').set(op).expect(200);
    expect(connection.body).toMatchObject({ id: connectionId, status: 'active' });
    const again = await send(second, 'keeper', 'after-restart', {
      funding_source_id: 'FSDEMOMAIN',
      rewards: [reward({ recipient: { name: 'Grace Hopper', email: 'grace@example.com' } })],
    }).expect(201);
    expect(again.body.status).toBe('sent');
    const ordersAfter = await controlOrders(second);
    expect(ordersAfter.map((o) => o.id)).toEqual(expect.arrayContaining(ordersBefore.map((o) => o.id)));
    expect(ordersAfter).toHaveLength(3);
    expect(
      (await request(second.baseUrl).get('/sandbox/__control/settings').expect(200)).body.code_ttl_seconds,
    ).toBe(300);
    // The shared objects are linked again: by id, by external_id and through the rewards, with the odd text intact.
    const byExternalId = await request(second.baseUrl)
      .get(`/sandbox/api/v2/orders/${encodeURIComponent('odd-\u0000-id')}`)
      .set(bearer(DEMO_API_KEY))
      .expect(200);
    expect(byExternalId.body.order.id).toBe(odd.body.order.id);
    expect(byExternalId.body.order.rewards[0].recipient.name).toBe(oddName);
    const rewardId = odd.body.order.rewards[0].id as string;
    const oneReward = await request(second.baseUrl)
      .get(`/sandbox/api/v2/rewards/${rewardId}`)
      .set(bearer(DEMO_API_KEY))
      .expect(200);
    expect(oneReward.body.reward.order_id).toBe(odd.body.order.id);
    const repeat = await request(second.baseUrl)
      .post('/sandbox/api/v2/orders')
      .set(bearer(DEMO_API_KEY))
      .send(
        singleOrder(
          { external_id: 'odd-\u0000-id' },
          { recipient: { name: oddName, email: 'odd@example.com' } },
        ),
      )
      .expect(201);
    expect(repeat.body.order.id).toBe(odd.body.order.id);

    // Past the access token's life (the sandbox's clock): the next send refreshes once with the restored refresh token.
    await control(second, '/clock/advance', { seconds: 7200 + 120 });
    const refreshed = await send(second, 'keeper', 'after-expiry', {
      funding_source_id: 'FSDEMOMAIN',
      rewards: [reward({ recipient: { name: 'Alan Turing', email: 'alan@example.com' } })],
    }).expect(201);
    expect(refreshed.body.status).toBe('sent');
    const grantAfter = (await stats(second)).grants.find((g: Json) => g.id === grantBefore.id);
    expect(grantAfter).toMatchObject({ revoked: false, refresh_count: 1 });
    expect(
      (await request(second.baseUrl).get('/v1/tenants/keeper/connection').set(op).expect(200)).body.status,
    ).toBe('active');
  }, 60_000);
});

/** A sandbox of our own (options the tests' startSandbox does not take), on a free port. */
async function listen(
  options: Partial<SandboxOptions>,
): Promise<Sandbox & { baseUrl: string; stop(): Promise<void> }> {
  const sandbox = createSandbox({
    clients: [
      {
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.clientSecret,
        redirectUris: [CLIENT.redirectUri],
        name: 'Test Platform',
      },
    ],
    control: true,
    ...options,
  });
  const server: Server = await new Promise((resolve) => {
    const s = sandbox.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    ...sandbox,
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: async () => {
      await sandbox.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('sandbox: every map that grows from traffic is bounded', () => {
  // The mounted sandbox keeps at most UNAUTHENTICATED_MAP_CAP (10,000) of each; the bound is proven here with the cap
  // lowered through /__control/settings — the same code path (setBounded) — so that twice the cap is 2,000 requests
  // through the gateway rather than 20,000.
  const CAP = 1_000;
  it(`keeps at most its cap of pending consents (${UNAUTHENTICATED_MAP_CAP} unless lowered) through twice the cap in consent requests to the mounted sandbox`, async () => {
    const t = await startTestApp({ LOG_LEVEL: 'error' });
    try {
      expect(UNAUTHENTICATED_MAP_CAP).toBe(10_000);
      const settings = async () =>
        (await request(t.baseUrl).get('/sandbox/__control/settings').expect(200)).body as Json;
      expect((await settings()).unauthenticated_map_cap).toBe(UNAUTHENTICATED_MAP_CAP);
      // The cap can be lowered, never raised.
      await request(t.baseUrl)
        .post('/sandbox/__control/settings')
        .send({ unauthenticated_map_cap: UNAUTHENTICATED_MAP_CAP + 1 })
        .expect(400);
      await control(t, '/settings', { unauthenticated_map_cap: CAP });
      expect((await settings()).unauthenticated_map_cap).toBe(CAP);
      const url = `${t.baseUrl}/sandbox/oauth/authorize?${new URLSearchParams({ client_id: EMBEDDED_SANDBOX_CLIENT.clientId, redirect_uri: `${t.baseUrl}/oauth/callback`, response_type: 'code' })}`;
      let ok = 0;
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          for (let i = 0; i < (2 * CAP) / 50; i++) {
            const res = await fetch(url);
            await res.text();
            if (res.status === 200) ok++;
          }
        }),
      );
      expect(ok).toBe(2 * CAP);
      const sizes = (await stats(t)).sizes;
      expect(sizes.pending_consents).toBe(CAP);
      // And what is saved is bounded the same way.
      const saved = await waitFor(
        () =>
          sqlOn(t.databaseUrl, `SELECT jsonb_array_length(state->'pendingConsents') AS n FROM sandbox_state`),
        (rows) => rows[0]?.n === CAP,
        10_000,
      );
      expect(saved[0].n).toBe(CAP);
      // Consents past their 10 minutes are swept.
      await control(t, '/clock/advance', { seconds: 11 * 60 });
      await request(t.baseUrl)
        .get('/sandbox/oauth/authorize')
        .query({
          client_id: EMBEDDED_SANDBOX_CLIENT.clientId,
          redirect_uri: `${t.baseUrl}/oauth/callback`,
          response_type: 'code',
        })
        .expect(200);
      expect((await stats(t)).sizes.pending_consents).toBe(1);
    } finally {
      await t.close();
    }
  }, 120_000);

  it('sweeps expired access tokens (an hour after expiry; until then they answer "no longer valid")', async () => {
    const sb = await listen({});
    try {
      const old = await connect(sb.baseUrl);
      expect((await get(sb.baseUrl, '/__control/stats')).body.sizes.access_tokens).toBe(1);
      await post(sb.baseUrl, '/__control/clock/advance', { seconds: 7200 + 60 });
      const expired = await get(sb.baseUrl, '/api/v2/fields', bearer(old.access_token));
      expect(expired.body.errors.message).toBe('The API key you provided is no longer valid.');
      await post(sb.baseUrl, '/__control/clock/advance', { seconds: 3600 });
      // The next token issued sweeps (as does the timer): the old token is gone, the new one lives.
      const fresh = await connect(sb.baseUrl);
      const sizes = (await get(sb.baseUrl, '/__control/stats')).body.sizes;
      expect(sizes).toMatchObject({ grants: 2, access_tokens: 1 });
      expect([...sb.state.grants.values()].map((g) => g.accessTokens.size)).toEqual([0, 1]);
      const gone = await get(sb.baseUrl, '/api/v2/fields', bearer(old.access_token));
      expect(gone.status).toBe(401);
      expect(gone.body.errors.message).toBe('The API key you provided is invalid.');
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(fresh.access_token))).status).toBe(200);
      // The grant itself still refreshes.
      const refreshed = await post(sb.baseUrl, '/oauth/token', {
        grant_type: 'refresh_token',
        refresh_token: old.refresh_token,
        client_id: CLIENT.clientId,
        client_secret: CLIENT.clientSecret,
      });
      expect(refreshed.status).toBe(200);
    } finally {
      await sb.stop();
    }
  });

  it('remembers the newest used refresh tokens per grant (reuse still revokes) and access tokens per grant', async () => {
    const sb = await listen({ limits: { usedRefreshTokensPerGrant: 5, accessTokensPerGrant: 3 } });
    try {
      let token = await connect(sb.baseUrl);
      const used: string[] = [];
      for (let i = 0; i < 12; i++) {
        used.push(token.refresh_token);
        const res = await post(sb.baseUrl, '/oauth/token', {
          grant_type: 'refresh_token',
          refresh_token: token.refresh_token,
          client_id: CLIENT.clientId,
          client_secret: CLIENT.clientSecret,
        });
        expect(res.status).toBe(200);
        token = res.body as typeof token;
      }
      expect((await get(sb.baseUrl, '/__control/stats')).body.sizes).toMatchObject({
        grants: 1,
        refresh_tokens: 5 + 1,
        access_tokens: 3,
      });
      // The oldest used one is forgotten (unknown: nothing happens); a recent one is reuse and revokes the grant.
      const forgotten = await post(sb.baseUrl, '/oauth/token', {
        grant_type: 'refresh_token',
        refresh_token: used[0],
        client_id: CLIENT.clientId,
        client_secret: CLIENT.clientSecret,
      });
      expect(forgotten.body).toEqual({ error: 'invalid_grant', error_description: 'unknown refresh token' });
      expect((await get(sb.baseUrl, '/__control/stats')).body.grants[0].revoked).toBe(false);
      const reused = await post(sb.baseUrl, '/oauth/token', {
        grant_type: 'refresh_token',
        refresh_token: used[11],
        client_id: CLIENT.clientId,
        client_secret: CLIENT.clientSecret,
      });
      expect(reused.status).toBe(400);
      expect((await get(sb.baseUrl, '/__control/stats')).body.grants[0]).toMatchObject({
        revoked: true,
        revoked_reason: 'refresh token reused',
      });
    } finally {
      await sb.stop();
    }
  });

  it('keeps at most N grants: the oldest revoked goes first, then the oldest, with its tokens', async () => {
    const sb = await listen({ limits: { grants: 3 } });
    try {
      const tokens = [];
      for (let i = 0; i < 3; i++) tokens.push(await connect(sb.baseUrl));
      const firstGrants = (await get(sb.baseUrl, '/__control/stats')).body.grants as Json[];
      await post(sb.baseUrl, `/__control/grants/${firstGrants[1].id}/revoke`, {});
      tokens.push(await connect(sb.baseUrl)); // drops the revoked second grant
      tokens.push(await connect(sb.baseUrl)); // none revoked now: drops the oldest (the first)
      const grants = (await get(sb.baseUrl, '/__control/stats')).body.grants as Json[];
      expect(grants.map((g) => g.id)).toEqual([firstGrants[2].id, expect.any(String), expect.any(String)]);
      expect((await get(sb.baseUrl, '/__control/stats')).body.sizes).toMatchObject({
        grants: 3,
        access_tokens: 3,
        refresh_tokens: 3,
      });
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(tokens[0].access_token))).status).toBe(401);
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(tokens[4].access_token))).status).toBe(200);
    } finally {
      await sb.stop();
    }
  });

  it('refuses a state parameter over 2048 characters without keeping anything (consents hold the state)', async () => {
    const sb = await listen({});
    try {
      const authorize = (state: string) =>
        fetch(
          `${sb.baseUrl}/oauth/authorize?${new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: CLIENT.redirectUri, response_type: 'code', state })}`,
          { redirect: 'manual' },
        );
      const long = await authorize('s'.repeat(2049));
      expect(long.status).toBe(302);
      const location = new URL(long.headers.get('location') as string);
      expect(location.searchParams.get('error')).toBe('invalid_request');
      expect(location.searchParams.has('state')).toBe(false);
      expect(sb.state.pendingConsents.size).toBe(0);
      expect((await authorize('s'.repeat(2048))).status).toBe(200);
      expect(sb.state.pendingConsents.size).toBe(1);
    } finally {
      await sb.stop();
    }
  });

  it('keeps the newest orders per account: the oldest go with their rewards and external ids', async () => {
    const sb = await listen({ limits: { ordersPerAccount: 200 } });
    try {
      for (let i = 0; i < 450; i++) {
        const res = await post(
          sb.baseUrl,
          '/api/v2/orders',
          singleOrder({ external_id: `cap-${i}` }),
          bearer(DEMO_API_KEY),
        );
        expect(res.status).toBe(200);
      }
      const orders = (await get(sb.baseUrl, '/api/v2/orders?limit=1', bearer(DEMO_API_KEY))).body;
      expect(orders.total_count).toBeLessThanOrEqual(200);
      expect(orders.total_count).toBeGreaterThanOrEqual(198);
      expect(orders.orders[0].external_id).toBe('cap-449');
      const rewards = (await get(sb.baseUrl, '/api/v2/rewards?limit=1', bearer(DEMO_API_KEY))).body;
      expect(rewards.total_count).toBe(orders.total_count);
      expect((await get(sb.baseUrl, '/api/v2/orders/cap-0', bearer(DEMO_API_KEY))).status).toBe(404);
      expect((await get(sb.baseUrl, '/api/v2/orders/cap-449', bearer(DEMO_API_KEY))).status).toBe(200);
      const account = sb.state.accounts.get('acc_demo');
      expect(account?.orders.size).toBe(orders.total_count);
      expect(account?.ordersByExternalId.size).toBe(orders.total_count);
      expect(account?.rewardsById.size).toBe(orders.total_count);
    } finally {
      await sb.stop();
    }
  });
});

describe('sandbox persistence: debounced writes', () => {
  it('writes at most once a second under a stream of changes, only when something changed, and once more on close', async () => {
    const writes: { at: number; json: string }[] = [];
    const sb = await listen({
      persistence: {
        load: async () => null,
        save: async (json) => {
          writes.push({ at: Date.now(), json });
        },
      },
    });
    let closed = false;
    try {
      await sb.ready;
      const started = Date.now();
      let n = 0;
      while (Date.now() - started < 2500) {
        const res = await post(
          sb.baseUrl,
          '/api/v2/orders',
          singleOrder({ external_id: `deb-${n++}` }),
          bearer(DEMO_API_KEY),
        );
        expect(res.status).toBe(200);
      }
      expect(n).toBeGreaterThan(50);
      const elapsed = Date.now() - started;
      expect(writes.length).toBeGreaterThanOrEqual(1);
      expect(writes.length).toBeLessThanOrEqual(Math.ceil(elapsed / 1000) + 1);
      for (let i = 1; i < writes.length; i++)
        expect(writes[i].at - writes[i - 1].at).toBeGreaterThanOrEqual(990);
      // Reads change nothing: no write follows them.
      await new Promise((r) => setTimeout(r, 1300));
      const settled = writes.length;
      for (let i = 0; i < 20; i++) await get(sb.baseUrl, '/api/v2/orders', bearer(DEMO_API_KEY));
      await new Promise((r) => setTimeout(r, 1300));
      expect(writes.length).toBe(settled);
      // The last write holds every order.
      expect(JSON.parse(writes[writes.length - 1].json).accounts[0].orders).toHaveLength(n);
      // A change then a close: written at once, and the sandbox answers 503 afterwards.
      await post(sb.baseUrl, '/api/v2/orders', singleOrder({ external_id: 'last' }), bearer(DEMO_API_KEY));
      const before = writes.length;
      await sb.close();
      closed = true;
      expect(writes.length).toBe(before + 1);
      expect(JSON.parse(writes[writes.length - 1].json).accounts[0].orders).toHaveLength(n + 1);
      expect((await get(sb.baseUrl, '/api/v2/orders', bearer(DEMO_API_KEY))).status).toBe(503);
    } finally {
      if (!closed) await sb.close();
      await sb.stop();
    }
  });
});
