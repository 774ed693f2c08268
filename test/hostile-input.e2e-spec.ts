import { brotliCompressSync, gzipSync } from 'node:zlib';
import { request as httpRequest } from 'node:http';
import { rawRequest } from './support/raw-http';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { RETURN_URL, connectTenant, control, createTenant, op } from './support/connect';
import { reward, send } from './support/send';

/** Each finding of the hostile-traffic review, as a regression test: a clear 4xx, never a 500, nothing stored. */
describe('hostile input', () => {
  let t: TestApp;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  type Answer = { status: number; body: Record<string, any> };
  const raw = async (
    path: string,
    body: Buffer | string,
    headers: Record<string, string> = {},
  ): Promise<Answer> => {
    const res = await rawRequest(t.baseUrl, 'POST', path, body, { ...op, ...headers });
    return { status: res.status, body: JSON.parse(res.text || '{}') };
  };
  const expectStatus = async (p: Promise<Answer>, status: number) => {
    const res = await p;
    expect({ status: res.status, body: res.body }).toMatchObject({ status });
    return res;
  };

  beforeAll(async () => {
    t = await startTestApp({ LOG_LEVEL: 'silent' });
    await control(t, '/reset');
    await createTenant(t, 'target');
    await connectTenant(t, 'target');
  });
  afterAll(async () => {
    await t.close();
  });

  it('a nested array where a reward belongs (rewards: [[{…}]]) → 400, not a crash in the dispatch service', async () => {
    const res = await send(t, 'target', 'nested-array', { rewards: [[reward()]] }).expect(400);
    expect(res.body.error.code).toBe('validation_failed');
  });

  it('JSON nested 5,000 levels deep → 400 naming where, before class-transformer sees it', async () => {
    const deep = `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`;
    const res = await expectStatus(raw('/v1/tenants', deep), 400);
    expect(res.body.error.details[0]).toMatchObject({
      reason: expect.stringMatching(/nested deeper than 32/),
    });
  });

  it('100,000 empty rewards → 400 at once (array length), not seconds of validation and a RangeError', async () => {
    const body = JSON.stringify({ rewards: Array.from({ length: 100_000 }, () => ({})) });
    const res = await expectStatus(
      raw('/v1/tenants/target/rewards', body, { 'Idempotency-Key': 'huge' }),
      400,
    );
    expect(res.body.error.details[0]).toEqual({
      field: 'rewards',
      reason: 'at most 10000 items (got 100000)', // the send route's limit: batches of up to 10,000
    });
  });

  it.each([
    ['gzip', gzipSync(Buffer.from('{"id":"x","name":"y"}'))],
    ['br', brotliCompressSync(Buffer.from('{"id":"x","name":"y"}'))],
    ['gzip', Buffer.from('not gzip at all')],
    ['deflate', Buffer.from([0x78, 0x9c, 0x01])],
  ])('a %s-encoded body (valid or corrupt) → 415, nothing decompressed', async (encoding, body) => {
    const res = await expectStatus(raw('/v1/tenants', body, { 'Content-Encoding': encoding }), 415);
    expect(res.body.error).toMatchObject({
      code: 'unsupported_media_type',
      details: [{ field: 'Content-Encoding' }],
    });
  });

  it('a charset other than UTF-8 → 415 naming it', async () => {
    const res = await expectStatus(
      raw('/v1/tenants', '{"id":"cs","name":"C"}', { 'Content-Type': 'application/json; charset=latin-99' }),
      415,
    );
    expect(res.body.error.details[0]).toEqual({
      field: 'Content-Type',
      reason: 'charset latin-99 is not accepted',
    });
    await expectStatus(
      raw('/v1/tenants', '{"id":"cs-utf","name":"C"}', { 'Content-Type': 'application/json; charset=UTF-8' }),
      201,
    );
  });

  it('a lone surrogate in an e-mail → 400, not a URIError in the validator', async () => {
    const body = `{"rewards":[{"recipient":{"name":"A","email":"a\\ud800@example.com"},"value":{"denomination":5,"currency_code":"USD"},"products":["PRODAMAZONUS"]}]}`;
    const res = await expectStatus(
      raw('/v1/tenants/target/rewards', body, { 'Idempotency-Key': 'surrogate' }),
      400,
    );
    expect(res.body.error.details[0]).toEqual({
      field: 'rewards[0].recipient.email',
      reason: 'contains an unpaired surrogate (not valid Unicode)',
    });
  });

  it('invalid UTF-8 in a body → 400, not silently replaced', async () => {
    const body = Buffer.concat([
      Buffer.from('{"id":"utf","name":"'),
      Buffer.from([0xc3, 0x28]),
      Buffer.from('"}'),
    ]);
    const res = await expectStatus(raw('/v1/tenants', body), 400);
    expect(res.body.error).toMatchObject({
      code: 'invalid_json',
      details: [{ reason: 'invalid UTF-8 byte sequence' }],
    });
    await request(t.baseUrl).get('/v1/tenants/utf').set(op).expect(404);
  });

  it.each([
    ['__proto__ at the top', '{"__proto__":{"admin":true},"id":"proto1","name":"P"}', '__proto__'],
    [
      'constructor.prototype',
      '{"id":"proto2","name":"P","constructor":{"prototype":{"x":1}}}',
      'constructor',
    ],
    [
      'a custom-field label __proto__',
      JSON.stringify({ rewards: [{ ...reward(), custom_fields: JSON.parse('{"__proto__":"Sales"}') }] }),
      'rewards[0].custom_fields.__proto__',
    ],
  ])('a prototype key (%s) → 400 naming it', async (_what, body, field) => {
    const path = field.startsWith('rewards') ? '/v1/tenants/target/rewards' : '/v1/tenants';
    const res = await expectStatus(raw(path, body, { 'Idempotency-Key': `proto-${field}` }), 400);
    expect(res.body.error.details[0]).toMatchObject({
      field,
      reason: expect.stringContaining('not an accepted property name'),
    });
  });

  it('a NUL character anywhere in the body → 400 naming where (one pass: while parsing)', async () => {
    const res = await expectStatus(raw('/v1/tenants', '{"id":"nul","name":"a\\u0000b"}'), 400);
    expect(res.body.error.details[0]).toEqual({
      field: 'name',
      reason: 'contains a NUL (\\u0000) character',
    });
  });

  it('a malformed percent-encoded cookie on /oauth/callback → a 4xx page, not a 500', async () => {
    const res = await request(t.baseUrl)
      .get('/oauth/callback?code=x&state=yyyyyyyyyyyyyyyyyyyyyyyyyyyy')
      .set('Cookie', 'rg_connect=%E0%A4%A');
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });

  it('a return_url new URL() cannot parse (http://xn--a) is refused when stored, not when the browser comes back', async () => {
    const res = await request(t.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .send({ id: 'puny', name: 'P', return_urls: ['http://xn--a'] })
      .expect(400);
    expect(res.body.error.details[0].field).toBe('return_urls');
    await request(t.baseUrl)
      .patch('/v1/tenants/target')
      .set(op)
      .send({ return_urls: [RETURN_URL, 'http://xn--a'] })
      .expect(400);
  });

  it('a wrong key is refused from the headers: the server answers before the body has even arrived', async () => {
    const url = new URL(`${t.baseUrl}/v1/tenants/target/rewards`);
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: {
            Authorization: 'Bearer rgk_wrongwrongwrongwrongwrong',
            'Content-Type': 'application/json',
            'Content-Length': String(1024 * 1024),
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
          req.destroy();
        },
      );
      req.on('error', reject);
      req.write('{"rewards": ['); // 13 bytes of a 1 MiB body; the rest never comes
    });
    expect(status).toBe(401);
  });
});

describe('throttling failed authentications', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ LOG_LEVEL: 'silent' });
  });
  afterAll(async () => {
    await t.close();
  });

  it('answers 429 with Retry-After once a client has failed 20 times in a minute, and counts in Postgres', async () => {
    const statuses: number[] = [];
    let retryAfter: string | undefined;
    for (let i = 0; i < 30; i++) {
      const res = await request(t.baseUrl)
        .get('/v1/tenants/x')
        .set('Authorization', `Bearer rgk_${String(i).padStart(4, '0')}${'z'.repeat(30)}`);
      statuses.push(res.status);
      if (res.status === 429) retryAfter = res.headers['retry-after'];
    }
    expect(statuses.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(21).every((s) => s === 429)).toBe(true);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    const { sqlOn } = await import('./support/database');
    const rows = await sqlOn(t.databaseUrl, `SELECT key, points FROM auth_failures WHERE key LIKE '%ip:%'`);
    expect(rows[0].points).toBeGreaterThan(20);
    // The operator key from the same blocked address is refused too (the block is per client address).
    await request(t.baseUrl).get('/v1/tenants/x').set(op).expect(429);
  });
});
