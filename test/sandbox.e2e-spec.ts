import request from 'supertest';
import type { RunningSandbox } from './support/sandbox';
import { CLIENT, connect, get, pkcePair, post, startSandbox } from './support/sandbox';
import { SERVICE_ID_12, arrayOrder, setSettings, singleOrder } from './support/sandbox-orders';

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** The current single-`reward` form. */
const order = singleOrder;

describe('sandbox: the rewards-service emulator over real HTTP', () => {
  let sb: RunningSandbox;
  const authorizeUrl = (params: Record<string, string>) =>
    `/oauth/authorize?${new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: CLIENT.redirectUri, response_type: 'code', ...params })}`;
  const exchange = (code: string, extra: Record<string, string> = {}) =>
    post(sb.baseUrl, '/oauth/token', {
      grant_type: 'authorization_code',
      code,
      redirect_uri: CLIENT.redirectUri,
      client_id: CLIENT.clientId,
      client_secret: CLIENT.clientSecret,
      ...extra,
    });
  const refresh = (refreshToken: string) =>
    post(sb.baseUrl, '/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: CLIENT.clientId,
      client_secret: CLIENT.clientSecret,
    });
  const codeFrom = (location: string) => new URL(location).searchParams.get('code') as string;

  beforeAll(async () => {
    sb = await startSandbox();
  });
  afterAll(async () => {
    await sb.close();
  });
  beforeEach(async () => {
    await post(sb.baseUrl, '/__control/reset', {});
  });

  describe('authorization code flow', () => {
    it('shows a consent page, redirects with code and state on approval, and exchanges the code (JSON)', async () => {
      const consent = await request(sb.baseUrl)
        .get(authorizeUrl({ scope: 'default team_management', state: 'xyz' }))
        .expect(200);
      expect(consent.text).toContain('Demo Rewards Co');
      expect(consent.text).toContain('team_management');
      expect(consent.text).toContain('Approve');
      const requestId = /name="request_id" value="([^"]+)"/.exec(consent.text)?.[1] as string;
      const approved = await request(sb.baseUrl)
        .post('/oauth/authorize/decision')
        .type('form')
        .send({ request_id: requestId, decision: 'approve', account_id: 'acc_demo' })
        .expect(302);
      const location = new URL(approved.headers.location);
      expect(`${location.origin}${location.pathname}`).toBe(CLIENT.redirectUri);
      expect(location.searchParams.get('state')).toBe('xyz');
      const token = await exchange(location.searchParams.get('code') as string);
      expect(token.status).toBe(200);
      expect(token.headers.get('cache-control')).toBe('no-store');
      expect(token.body).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: 7200,
        refresh_token: expect.any(String),
        scope: 'default team_management',
        created_at: expect.any(Number),
      });
      expect(Math.abs(token.body.created_at - Date.now() / 1000)).toBeLessThan(5);
      const orgs = await get(sb.baseUrl, '/api/v2/organizations', bearer(token.body.access_token));
      expect(orgs.status).toBe(200);
      expect(orgs.body.organizations[0].name).toBe('Demo Rewards Co');
    });

    it('redirects with error=access_denied when the user denies', async () => {
      const consent = await request(sb.baseUrl)
        .get(authorizeUrl({ state: 's1' }))
        .expect(200);
      const requestId = /name="request_id" value="([^"]+)"/.exec(consent.text)?.[1] as string;
      const denied = await request(sb.baseUrl)
        .post('/oauth/authorize/decision')
        .type('form')
        .send({ request_id: requestId, decision: 'deny' })
        .expect(302);
      const location = new URL(denied.headers.location);
      expect(location.searchParams.get('error')).toBe('access_denied');
      expect(location.searchParams.get('state')).toBe('s1');
      expect(location.searchParams.get('code')).toBeNull();
    });

    it('refuses an unknown client or a redirect URI that is not an exact match, without redirecting', async () => {
      await request(sb.baseUrl)
        .get(authorizeUrl({ client_id: 'nobody' }))
        .expect(400);
      const res = await request(sb.baseUrl)
        .get(authorizeUrl({ redirect_uri: `${CLIENT.redirectUri}/extra` }))
        .expect(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.text).toContain('Redirect URI mismatch');
    });

    it('uses default when scope is absent and redirects with invalid_scope for an unknown one', async () => {
      await post(sb.baseUrl, '/__control/settings', { auto_approve: true });
      const ok = await request(sb.baseUrl).get(authorizeUrl({})).expect(302);
      const token = await exchange(codeFrom(ok.headers.location));
      expect(token.body.scope).toBe('default');
      const bad = await request(sb.baseUrl)
        .get(authorizeUrl({ scope: 'default admin', state: 'q' }))
        .expect(302);
      expect(new URL(bad.headers.location).searchParams.get('error')).toBe('invalid_scope');
      expect(new URL(bad.headers.location).searchParams.get('state')).toBe('q');
      const wrongType = await request(sb.baseUrl)
        .get(authorizeUrl({ response_type: 'token' }))
        .expect(302);
      expect(new URL(wrongType.headers.location).searchParams.get('error')).toBe('unsupported_response_type');
    });

    it('accepts form-encoded token requests with HTTP Basic client authentication', async () => {
      await post(sb.baseUrl, '/__control/settings', { auto_approve: true });
      const auth = await request(sb.baseUrl).get(authorizeUrl({})).expect(302);
      const res = await request(sb.baseUrl)
        .post('/oauth/token')
        .auth(CLIENT.clientId, CLIENT.clientSecret)
        .type('form')
        .send({
          grant_type: 'authorization_code',
          code: codeFrom(auth.headers.location),
          redirect_uri: CLIENT.redirectUri,
        })
        .expect(200);
      expect(res.body.token_type).toBe('Bearer');
    });

    it('rejects a wrong client secret with 401 invalid_client', async () => {
      const res = await post(sb.baseUrl, '/oauth/token', {
        grant_type: 'refresh_token',
        refresh_token: 'x',
        client_id: CLIENT.clientId,
        client_secret: 'wrong',
      });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
      const basic = await request(sb.baseUrl)
        .post('/oauth/token')
        .auth(CLIENT.clientId, 'wrong')
        .type('form')
        .send({ grant_type: 'refresh_token', refresh_token: 'x' })
        .expect(401);
      expect(basic.body.error).toBe('invalid_client');
    });

    it('binds the code to the redirect URI, uses it once, and revokes what a replayed code obtained', async () => {
      await post(sb.baseUrl, '/__control/settings', { auto_approve: true });
      const auth = await request(sb.baseUrl).get(authorizeUrl({})).expect(302);
      const code = codeFrom(auth.headers.location);
      const wrongUri = await exchange(code, { redirect_uri: 'http://127.0.0.1:9/other' });
      expect(wrongUri.body.error).toBe('invalid_grant');
      const first = await exchange(code);
      expect(first.status).toBe(200);
      const replay = await exchange(code);
      expect(replay.status).toBe(400);
      expect(replay.body.error).toBe('invalid_grant');
      const after = await get(sb.baseUrl, '/api/v2/organizations', bearer(first.body.access_token));
      expect(after.status).toBe(401);
    });

    it('expires codes quickly', async () => {
      await post(sb.baseUrl, '/__control/settings', { auto_approve: true });
      const auth = await request(sb.baseUrl).get(authorizeUrl({})).expect(302);
      await post(sb.baseUrl, '/__control/clock/advance', { seconds: 600 });
      expect((await exchange(codeFrom(auth.headers.location))).body.error).toBe('invalid_grant');
    });

    it('verifies PKCE (S256) when the authorization request carried a challenge', async () => {
      await post(sb.baseUrl, '/__control/settings', { auto_approve: true });
      const { verifier, challenge } = pkcePair();
      const a = await request(sb.baseUrl)
        .get(authorizeUrl({ code_challenge: challenge, code_challenge_method: 'S256' }))
        .expect(302);
      expect((await exchange(codeFrom(a.headers.location))).body.error).toBe('invalid_grant');
      const b = await request(sb.baseUrl)
        .get(authorizeUrl({ code_challenge: challenge, code_challenge_method: 'S256' }))
        .expect(302);
      expect(
        (await exchange(codeFrom(b.headers.location), { code_verifier: 'x'.repeat(43) })).body.error,
      ).toBe('invalid_grant');
      const c = await request(sb.baseUrl)
        .get(authorizeUrl({ code_challenge: challenge, code_challenge_method: 'S256' }))
        .expect(302);
      expect((await exchange(codeFrom(c.headers.location), { code_verifier: verifier })).status).toBe(200);
      const plain = await request(sb.baseUrl)
        .get(authorizeUrl({ code_challenge: challenge, code_challenge_method: 'plain' }))
        .expect(302);
      expect(new URL(plain.headers.location).searchParams.get('error')).toBe('invalid_request');
    });
  });

  describe('refresh tokens: single-use, never expire', () => {
    it('rotates the pair on each refresh; the old access token stays valid until it expires', async () => {
      const first = await connect(sb.baseUrl);
      await post(sb.baseUrl, '/__control/clock/advance', { seconds: 365 * 24 * 3600 }); // refresh tokens never expire
      const second = await refresh(first.refresh_token);
      expect(second.status).toBe(200);
      expect(second.body.refresh_token).not.toBe(first.refresh_token);
      expect(second.body.access_token).not.toBe(first.access_token);
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(second.body.access_token))).status).toBe(200);
      const stats = await get(sb.baseUrl, '/__control/stats');
      expect(Object.values(stats.body.refreshes)).toEqual([1]);
    });

    it('answers invalid_grant to a reused refresh token and revokes the whole grant', async () => {
      const first = await connect(sb.baseUrl);
      const second = await refresh(first.refresh_token);
      const reuse = await refresh(first.refresh_token);
      expect(reuse.status).toBe(400);
      expect(reuse.body).toEqual({ error: 'invalid_grant', error_description: expect.any(String) });
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(second.body.access_token))).status).toBe(401);
      expect((await refresh(second.body.refresh_token)).body.error).toBe('invalid_grant');
      const stats = await get(sb.baseUrl, '/__control/stats');
      expect(stats.body.grants[0]).toMatchObject({ revoked: true, revoked_reason: 'refresh token reused' });
    });

    it('answers 401 "no longer valid" once created_at + expires_in has passed', async () => {
      await post(sb.baseUrl, '/__control/settings', { access_token_ttl_seconds: 60 });
      const token = await connect(sb.baseUrl);
      expect(token.expires_in).toBe(60);
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(token.access_token))).status).toBe(200);
      await post(sb.baseUrl, '/__control/clock/advance', { seconds: 61 });
      const expired = await get(sb.baseUrl, '/api/v2/fields', bearer(token.access_token));
      expect(expired.status).toBe(401);
      expect(expired.body).toEqual({
        errors: { message: 'The API key you provided is no longer valid.', payload: {} },
      });
      const unknown = await get(sb.baseUrl, '/api/v2/fields', bearer('nonsense'));
      expect(unknown.status).toBe(401);
    });
  });

  it('enforces scopes: team_management alone cannot read fields or send orders', async () => {
    const token = await connect(sb.baseUrl, 'team_management');
    expect((await get(sb.baseUrl, '/api/v2/organizations', bearer(token.access_token))).status).toBe(200);
    expect((await get(sb.baseUrl, '/api/v2/fields', bearer(token.access_token))).status).toBe(403);
    expect((await post(sb.baseUrl, '/api/v2/orders', order(), bearer(token.access_token))).status).toBe(403);
    expect((await get(sb.baseUrl, '/api/v2/rewards', bearer(token.access_token))).status).toBe(403);
  });

  it('lists fields with Dropdown options and required flags', async () => {
    const token = await connect(sb.baseUrl);
    const res = await get(sb.baseUrl, '/api/v2/fields', bearer(token.access_token));
    expect(res.body.fields).toContainEqual({
      id: 'FLDDEPARTMENT',
      label: 'Department',
      data_type: 'Dropdown',
      data: { options: ['Sales', 'Engineering', 'Support', 'Marketing'] },
      required: true,
      scope: 'REWARD',
    });
  });

  describe('orders (the current single-reward form)', () => {
    let token: string;
    beforeEach(async () => {
      token = (await connect(sb.baseUrl)).access_token;
    });

    it('creates an order (200) with one reward carrying custom fields with labels', async () => {
      const res = await post(
        sb.baseUrl,
        '/api/v2/orders',
        order(
          { external_id: 'ext-1' },
          {
            custom_fields: [
              { id: 'FLDDEPARTMENT', value: 'Sales' },
              { id: 'FLDREGION', value: 'EMEA' },
            ],
          },
        ),
        bearer(token),
      );
      expect(res.status).toBe(200);
      expect(res.body.order).toMatchObject({
        external_id: 'ext-1',
        status: 'EXECUTED',
        channel: 'API',
        payment: { subtotal: 25, total: 25, fees: 0, currency_code: 'USD' },
      });
      expect(res.body.order.id).toMatch(SERVICE_ID_12);
      expect(res.body.order.rewards).toHaveLength(1);
      const reward = res.body.order.rewards[0];
      expect(reward.id).toMatch(SERVICE_ID_12);
      expect(reward).toMatchObject({
        order_id: res.body.order.id,
        delivery: { method: 'EMAIL', status: 'SCHEDULED' },
        value: { denomination: 25, currency_code: 'USD' },
        recipient: { name: 'Ada Lovelace', email: 'ada@example.com' },
        custom_fields: [
          { id: 'FLDDEPARTMENT', value: 'Sales', label: 'Department' },
          { id: 'FLDREGION', value: 'EMEA', label: 'Region' },
        ],
      });
      expect(reward.created_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
      expect((await get(sb.baseUrl, `/api/v2/rewards/${reward.id}`, bearer(token))).body.reward).toEqual(
        reward,
      );
      const missing = await get(sb.baseUrl, '/api/v2/rewards/NOSUCHREWARD', bearer(token));
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ errors: { message: 'Reward not found', payload: {} } });
    });

    it.each([
      [
        'an unknown custom field id',
        {
          custom_fields: [
            { id: 'FLDNOPE', value: 'x' },
            { id: 'FLDDEPARTMENT', value: 'Sales' },
          ],
        },
        'reward.custom_fields[0].id',
      ],
      [
        'a custom field id of the wrong form',
        { custom_fields: [{ id: 'fld_department', value: 'Sales' }] },
        'reward.custom_fields[0].id',
      ],
      [
        'a Dropdown value not in the options',
        { custom_fields: [{ id: 'FLDDEPARTMENT', value: 'Legal' }] },
        'reward.custom_fields[0].value',
      ],
      [
        'a missing required field',
        { custom_fields: [{ id: 'FLDREGION', value: 'EMEA' }] },
        'reward.custom_fields',
      ],
      [
        'a required field sent as null',
        { custom_fields: [{ id: 'FLDDEPARTMENT', value: null }] },
        'reward.custom_fields',
      ],
      ['a bad e-mail address', { recipient: { name: 'A', email: 'not-an-email' } }, 'reward.recipient.email'],
      ['a missing recipient name', { recipient: { email: 'a@example.com' } }, 'reward.recipient.name'],
      ['a negative denomination', { value: { denomination: -5 } }, 'reward.value.denomination'],
      ['an unknown product', { products: ['PRODNOPE'] }, 'reward.products'],
      ['an empty products array', { products: [] }, 'reward.products'],
      ['neither products nor campaign_id', { products: undefined }, 'reward.products'],
      ['an unknown delivery method', { delivery: { method: 'FAX' } }, 'reward.delivery.method'],
    ])('rejects %s with 400 naming the offending field', async (_name, reward, field) => {
      const res = await post(sb.baseUrl, '/api/v2/orders', order({}, reward), bearer(token));
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.errors.payload)).toEqual([field]);
      expect(res.body.errors.message).toEqual(expect.any(String));
    });

    it('rejects an unknown or missing funding source (400) and answers 402 when the funding source runs dry', async () => {
      const unknown = await post(
        sb.baseUrl,
        '/api/v2/orders',
        order({ payment: { funding_source_id: 'FSNOPE' } }),
        bearer(token),
      );
      expect(unknown.status).toBe(400);
      expect(unknown.body.errors.payload).toEqual({ 'payment.funding_source_id': 'FSNOPE' });
      const missing = await post(sb.baseUrl, '/api/v2/orders', order({ payment: {} }), bearer(token));
      expect(missing.status).toBe(400);
      expect(Object.keys(missing.body.errors.payload)).toEqual(['payment.funding_source_id']);
      await post(sb.baseUrl, '/__control/accounts/acc_demo/funding-sources/FSDEMOMAIN', { balance: 10 });
      const dry = await post(sb.baseUrl, '/api/v2/orders', order(), bearer(token));
      expect(dry.status).toBe(402);
      expect(dry.body).toEqual({
        errors: {
          message: 'Not enough funds to carry out this operation. Fund your balance to proceed.',
          payload: {},
        },
      });
    });

    it('treats external_id as the real service does: same payload → 201 original, other payload → 409', async () => {
      const first = await post(
        sb.baseUrl,
        '/api/v2/orders',
        order({ external_id: 'dispatch-42' }),
        bearer(token),
      );
      expect(first.status).toBe(200);
      const again = await post(
        sb.baseUrl,
        '/api/v2/orders',
        order({ external_id: 'dispatch-42' }),
        bearer(token),
      );
      expect(again.status).toBe(201);
      expect(again.body.order).toEqual(first.body.order);
      const other = await post(
        sb.baseUrl,
        '/api/v2/orders',
        order({ external_id: 'dispatch-42' }, { value: { denomination: 30 } }),
        bearer(token),
      );
      expect(other.status).toBe(409);
      expect(other.body.errors.payload).toEqual({ external_id: 'dispatch-42' });
      const orders = await get(sb.baseUrl, '/__control/orders');
      expect(
        orders.body.orders.filter((o: { external_id: string }) => o.external_id === 'dispatch-42'),
      ).toHaveLength(1);
    });

    it('filters rewards by field label, newest first, with paging and total_count', async () => {
      for (const [dept, n] of [
        ['Sales', 3],
        ['Support', 2],
      ] as const) {
        for (let i = 0; i < n; i++) {
          await post(
            sb.baseUrl,
            '/api/v2/orders',
            order(
              {},
              {
                recipient: { name: `${dept} ${i}`, email: `${i}@example.com` },
                custom_fields: [{ id: 'FLDDEPARTMENT', value: dept }],
              },
            ),
            bearer(token),
          );
        }
      }
      const sales = await get(sb.baseUrl, '/api/v2/rewards?Department=Sales', bearer(token));
      expect(sales.body.total_count).toBe(3);
      expect(sales.body.rewards.map((r: { recipient: { name: string } }) => r.recipient.name)).toEqual([
        'Sales 2',
        'Sales 1',
        'Sales 0',
      ]);
      const page = await get(sb.baseUrl, '/api/v2/rewards?Department=Sales&offset=1&limit=1', bearer(token));
      expect(page.body).toMatchObject({ total_count: 3, rewards: [{ recipient: { name: 'Sales 1' } }] });
      expect(
        (await get(sb.baseUrl, '/api/v2/rewards?Department=Legal', bearer(token))).body.total_count,
      ).toBe(0);
      expect((await get(sb.baseUrl, '/api/v2/rewards', bearer(token))).body.total_count).toBe(5);
      expect((await get(sb.baseUrl, '/api/v2/rewards?limit=0', bearer(token))).status).toBe(400);
      expect((await get(sb.baseUrl, '/api/v2/rewards?limit=500', bearer(token))).status).toBe(200);
      expect((await get(sb.baseUrl, '/api/v2/rewards?limit=501', bearer(token))).status).toBe(400);
    });
  });

  describe('orders in the older multi-reward form (order_shape: array)', () => {
    let token: string;
    beforeEach(async () => {
      token = (await connect(sb.baseUrl)).access_token;
      await setSettings(sb.baseUrl, { order_shape: 'array' });
    });

    it('creates one order holding several rewards, charged their sum', async () => {
      const res = await post(
        sb.baseUrl,
        '/api/v2/orders',
        arrayOrder(
          { external_id: 'multi-1' },
          {},
          {
            value: { denomination: 10, currency_code: 'USD' },
            recipient: { name: 'Bob', email: 'bob@example.com' },
          },
        ),
        bearer(token),
      );
      expect(res.status).toBe(200);
      expect(res.body.order.rewards.map((r: { recipient: { name: string } }) => r.recipient.name)).toEqual([
        'Ada Lovelace',
        'Bob',
      ]);
      expect(res.body.order.payment.total).toBe(35);
      const listed = (await get(sb.baseUrl, '/__control/orders')).body.orders;
      expect(listed).toEqual([
        expect.objectContaining({
          external_id: 'multi-1',
          rewards: 2,
          total: 35,
          recipients: ['ada@example.com', 'bob@example.com'],
        }),
      ]);
    });

    it.each([
      [
        'a Dropdown value not in the options',
        { custom_fields: [{ id: 'FLDDEPARTMENT', value: 'Legal' }] },
        'rewards[1].custom_fields[0].value',
      ],
      [
        'a bad e-mail address',
        { recipient: { name: 'A', email: 'not-an-email' } },
        'rewards[1].recipient.email',
      ],
      ['an unknown product', { products: ['PRODNOPE'] }, 'rewards[1].products'],
    ])('rejects %s in the second reward with 400 naming rewards[1]', async (_name, reward, field) => {
      const res = await post(sb.baseUrl, '/api/v2/orders', arrayOrder({}, {}, reward), bearer(token));
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.errors.payload)).toEqual([field]);
    });

    it('refuses the single reward object in this mode', async () => {
      const res = await post(sb.baseUrl, '/api/v2/orders', order(), bearer(token));
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.errors.payload)).toEqual(['reward']);
      expect((await get(sb.baseUrl, '/__control/orders')).body.total_count).toBe(0);
    });
  });

  describe('fault injection', () => {
    let token: string;
    beforeEach(async () => {
      token = (await connect(sb.baseUrl)).access_token;
    });

    it('adds latency', async () => {
      await post(sb.baseUrl, '/__control/faults', { route: 'fields', latency_ms: 300, times: 1 });
      const started = Date.now();
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(token))).status).toBe(200);
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    });

    it('answers a chosen status without doing the work, a given number of times', async () => {
      await post(sb.baseUrl, '/__control/faults', { route: 'orders', status: 503, times: 2 });
      expect((await post(sb.baseUrl, '/api/v2/orders', order(), bearer(token))).status).toBe(503);
      expect((await post(sb.baseUrl, '/api/v2/orders', order(), bearer(token))).status).toBe(503);
      expect((await post(sb.baseUrl, '/api/v2/orders', order(), bearer(token))).status).toBe(200);
      expect((await get(sb.baseUrl, '/__control/orders')).body.total_count).toBe(1);
      expect((await get(sb.baseUrl, '/__control/stats')).body.calls.orders).toBe(3);
    });

    it('answers 429 with Retry-After', async () => {
      await post(sb.baseUrl, '/__control/faults', { route: 'orders', status: 429, retry_after: 7, times: 1 });
      const res = await post(sb.baseUrl, '/api/v2/orders', order(), bearer(token));
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      expect(res.body).toEqual({ error: { message: 'Too many requests', payload: {} } });
    });

    it('fails the token endpoint with a 5xx', async () => {
      const pair = await connect(sb.baseUrl);
      await post(sb.baseUrl, '/__control/faults', { route: 'token', status: 500, times: 1 });
      expect((await refresh(pair.refresh_token)).status).toBe(500);
      expect((await refresh(pair.refresh_token)).status).toBe(200); // the failed call consumed nothing
    });

    it('drops the connection without an answer', async () => {
      await post(sb.baseUrl, '/__control/faults', { route: 'fields', drop: true, times: 1 });
      await expect(fetch(`${sb.baseUrl}/api/v2/fields`, { headers: bearer(token) })).rejects.toThrow();
      expect((await get(sb.baseUrl, '/api/v2/fields', bearer(token))).status).toBe(200);
    });

    it('does the work and then answers too late for the client', async () => {
      await post(sb.baseUrl, '/__control/faults', { route: 'orders', delay_after_work_ms: 1500, times: 1 });
      const attempt = fetch(`${sb.baseUrl}/api/v2/orders`, {
        method: 'POST',
        headers: { ...bearer(token), 'Content-Type': 'application/json' },
        body: JSON.stringify(order({ external_id: 'late-1' })),
        signal: AbortSignal.timeout(300),
      });
      await expect(attempt).rejects.toThrow();
      const orders = await get(sb.baseUrl, '/__control/orders');
      expect(orders.body.orders.map((o: { external_id: string }) => o.external_id)).toEqual(['late-1']);
      const retry = await post(sb.baseUrl, '/api/v2/orders', order({ external_id: 'late-1' }), bearer(token));
      expect(retry.status).toBe(201);
    });

    it('validates fault rules', async () => {
      expect((await post(sb.baseUrl, '/__control/faults', { route: 'nowhere', status: 500 })).status).toBe(
        400,
      );
      expect((await post(sb.baseUrl, '/__control/faults', { route: 'orders', probability: 3 })).status).toBe(
        400,
      );
    });
  });
});
