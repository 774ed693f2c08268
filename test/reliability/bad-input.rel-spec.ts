import request from 'supertest';
import type { TestApp } from '../support/app';
import { startTestApp } from '../support/app';
import { connectTenant, control, createTenant, op } from '../support/connect';

/** Every JSON endpoint, every kind of bad input: always a 4xx in the one error shape, never a 500. */
describe('reliability: bad-input sweep over every endpoint', () => {
  let t: TestApp;
  let connectionId: string;
  beforeAll(async () => {
    t = await startTestApp({ LOG_LEVEL: 'silent', OPS_PROBE_INTERVAL_MS: '0' });
    await control(t, '/reset');
    await createTenant(t, 'target');
    connectionId = await connectTenant(t, 'target');
  });
  afterAll(async () => {
    await t.close();
  });

  const huge = 'x'.repeat(100_000);
  const unicode = '🎁 Ünïcødé \u202Eevil\u200B \u0000 日本語';
  const deep = JSON.parse(`${'{"a":'.repeat(500)}1${'}'.repeat(500)}`) as unknown;
  const values: [string, unknown][] = [
    ['null', null],
    ['true', true],
    ['-1', -1],
    ['0', 0],
    ['1e308', 1e308],
    ['-1e308', -1e308],
    ['1.23456789', 1.23456789],
    ['2**63', 2 ** 63],
    ['""', ''],
    ['100,000 characters', huge],
    ['unicode with a NUL', unicode],
    ['[]', []],
    ['{}', {}],
    ['[[[]]]', [[[]]]],
    ['500 levels deep', deep],
    ['a __proto__ object', { __proto__: { admin: true } }],
    ['a constructor.prototype object', { constructor: { prototype: { x: 1 } } }],
  ];

  /** Each variant of a valid body, named: the whole body replaced, one key dropped, one key given each value. */
  function bodiesFor(base: Record<string, unknown>): [string, unknown][] {
    const out: [string, unknown][] = [
      ['body []', []],
      ['body "string"', 'string'],
      ['body 42', 42],
      ['body null', null],
      ['body {}', {}],
      ['an unexpected property', { ...base, unexpected: 1 }],
    ];
    for (const key of Object.keys(base)) {
      const { [key]: _dropped, ...missing } = base;
      out.push([`no ${key}`, missing]);
      for (const [name, v] of values) out.push([`${key}: ${name}`, { ...base, [key]: v }]);
    }
    return out;
  }

  const reward = {
    recipient: { name: 'A', email: 'a@example.com' },
    value: { denomination: 5, currency_code: 'USD' },
    products: ['PRODAMAZONUS'],
  };
  const posts: [string, string, Record<string, unknown>][] = [
    ['POST', '/v1/tenants', { id: 'new-tenant', name: 'New' }],
    ['PATCH', '/v1/tenants/target', { name: 'Renamed' }],
    ['POST', '/v1/tenants/target/api-keys', { name: 'k' }],
    ['POST', '/v1/tenants/target/connect-sessions', { environment: 'sandbox', scopes: ['default'] }],
    ['POST', '/v1/tenants/target/rewards', { funding_source_id: 'FSDEMOMAIN', rewards: [reward] }],
    [
      'POST',
      '/v1/tenants/target/rewards',
      {
        funding_source_id: 'FSDEMOMAIN',
        rewards: [{ ...reward, value: { denomination: 1e308, currency_code: 'USD' } }],
      },
    ],
    [
      'POST',
      '/v1/tenants/target/rewards',
      {
        funding_source_id: 'FSDEMOMAIN',
        rewards: [{ ...reward, custom_fields: { Department: unicode, [huge.slice(0, 300)]: 'x' } }],
      },
    ],
  ];

  function expectClientError(res: request.Response, what: string) {
    if (res.status < 400 || res.status >= 500) {
      throw new Error(`${what} → ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    }
    const e = res.body?.error;
    if (typeof e?.code !== 'string' || typeof e?.message !== 'string' || !Array.isArray(e?.details)) {
      throw new Error(`${what} → ${res.status} without the error shape: ${res.text.slice(0, 200)}`);
    }
  }

  /**
   * The variants that are valid input, with their answers: an empty patch changes nothing; a connect session needs
   * nothing beyond its defaults, and an optional field sent as null is absent (its default). Every other variant must
   * be refused with a 4xx in the error shape — a `null` body included.
   */
  const ACCEPTED = [
    'PATCH /v1/tenants/target body {} → 200',
    'PATCH /v1/tenants/target no name → 200',
    'POST /v1/tenants/target/connect-sessions body {} → 201',
    'POST /v1/tenants/target/connect-sessions no environment → 201',
    'POST /v1/tenants/target/connect-sessions environment: null → 201',
    'POST /v1/tenants/target/connect-sessions no scopes → 201',
    'POST /v1/tenants/target/connect-sessions scopes: null → 201',
  ];

  it('answers every malformed body with a 4xx, and every valid variant as it should', async () => {
    let n = 0;
    const accepted: string[] = [];
    for (const [i, [method, path, base]] of posts.entries()) {
      for (const [variant, body] of bodiesFor(base)) {
        const req = method === 'POST' ? request(t.baseUrl).post(path) : request(t.baseUrl).patch(path);
        // Send raw JSON text, so scalars and arrays go out exactly as a hostile client would send them.
        const res = await req
          .set(op)
          .set('Idempotency-Key', `sweep-${n++}`)
          .set('Content-Type', 'application/json')
          .send(JSON.stringify(body));
        const what = `${method} ${path}${path.endsWith('/rewards') ? ` (body ${i})` : ''} ${variant}`;
        if (res.status < 400) accepted.push(`${what} → ${res.status}`);
        else expectClientError(res, what);
      }
    }
    expect(accepted).toEqual(ACCEPTED);
    expect(n).toBeGreaterThan(250); // every variant was sent
  }, 120_000);

  it('answers invalid JSON, wrong content types, oversized bodies and odd headers with a 4xx', async () => {
    for (const [method, path] of posts) {
      const call = () =>
        (method === 'POST' ? request(t.baseUrl).post(path) : request(t.baseUrl).patch(path))
          .set(op)
          .set('Idempotency-Key', 'odd');
      expectClientError(
        await call().set('Content-Type', 'application/json').send('{"broken":'),
        `${path} invalid json`,
      );
      expectClientError(
        await call().set('Content-Type', 'application/json').send('\u0000\u0001'),
        `${path} binary json`,
      );
      expectClientError(await call().set('Content-Type', 'text/plain').send('hello'), `${path} text/plain`);
      expectClientError(await call().set('Content-Type', 'application/xml').send('<a/>'), `${path} xml`);
      expectClientError(await call().type('form').send('a=1'), `${path} form`);
      expectClientError(
        await call().set('Content-Type', 'application/json; charset=latin-99').send('{}'),
        `${path} charset`,
      );
      expectClientError(
        await call()
          .set('Content-Type', 'application/json')
          .send(`{"x":"${'y'.repeat(1_100_000)}"}`),
        `${path} 1.1 MB`,
      );
    }
    const longKey = await request(t.baseUrl)
      .post('/v1/tenants/target/rewards')
      .set(op)
      .set('Idempotency-Key', 'k'.repeat(5000))
      .send({ rewards: [reward] });
    expectClientError(longKey, 'long idempotency key');
    const unicodeKey = await request(t.baseUrl)
      .post('/v1/tenants/target/rewards')
      .set(op)
      .set('Idempotency-Key', encodeURIComponent(unicode))
      .send({ funding_source_id: 'FSDEMOMAIN', rewards: [{ ...reward, products: [] }] });
    expectClientError(unicodeKey, 'unicode key');
    for (const auth of ['Bearer', 'Bearer  ', `Bearer ${huge}`, 'Basic Og==', 'Bearer \u00ff\u00fe\u00e9']) {
      expectClientError(
        await request(t.baseUrl).get('/v1/tenants/target').set('Authorization', auth),
        `auth ${auth.slice(0, 20)}`,
      );
    }
  });

  it('answers bad path parameters and query strings with a 4xx', async () => {
    const gets = [
      '/v1/tenants/%00',
      `/v1/tenants/${'a'.repeat(5000)}`,
      '/v1/tenants/target/connection?environment=mars',
      '/v1/tenants/target/connection?environment[]=sandbox',
      '/v1/tenants/target/fields?environment=1e308',
      '/v1/tenants/target/rewards?limit=-1',
      '/v1/tenants/target/rewards?offset=abc',
      '/v1/tenants/target/rewards?Department=Sales&Department=Support',
      `/v1/tenants/target/rewards?${encodeURIComponent(unicode)}=1`,
      '/v1/tenants/target/dispatches/not-a-uuid',
      '/v1/tenants/target/dispatches?limit=1e400',
      '/v1/tenants/target/dispatches?status=sent&status=failed',
      '/v1/tenants/target/api-keys/../../ops',
      '/v1/ops/connections?limit=0',
      '/v1/ops/connections?health=%F0%9F%8E%81',
      '/v1/ops/connections/123',
      '/ops?status=whatever',
    ];
    for (const path of gets) {
      const res = path.startsWith('/ops')
        ? await request(t.baseUrl).get(path).auth('ops', t.config.operatorApiKey)
        : await request(t.baseUrl).get(path).set(op);
      expectClientError(res, `GET ${path.slice(0, 80)}`);
    }
    for (const path of [
      '/v1/ops/connections/not-a-uuid/check',
      '/v1/ops/connections/00000000-0000-4000-8000-000000000000/refresh',
    ]) {
      expectClientError(await request(t.baseUrl).post(path).set(op).send({}), `POST ${path}`);
    }
    expectClientError(
      await request(t.baseUrl).delete('/v1/tenants/target/api-keys/xyz').set(op),
      'DELETE api key',
    );
    expectClientError(
      await request(t.baseUrl).delete('/v1/ops/connections/xyz/fields-cache').set(op),
      'DELETE fields cache',
    );
    expectClientError(
      await request(t.baseUrl)
        .post(`/ops/connections/${connectionId}/check`)
        .auth('ops', t.config.operatorApiKey)
        .type('form')
        .send('csrf=forged'),
      'dashboard without csrf',
    );
    // Browser pages answer 4xx pages, not 500s.
    for (const path of [
      '/connect/%00',
      `/connect/${'z'.repeat(43)}/authorize`,
      '/oauth/callback?state[]=a',
      '/oauth/callback?state=x&code=y',
      `/oauth/callback?error=${encodeURIComponent(unicode)}`,
    ]) {
      const res = await request(t.baseUrl).get(path);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    }
  });
});
