import { connect } from 'node:net';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward } from './support/send';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Sends raw bytes and returns the raw answer (for what Node's HTTP parser refuses before any middleware). */
function raw(baseUrl: string, bytes: string): Promise<string> {
  const { port, hostname } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
    socket.setTimeout(5_000, () => socket.destroy(new Error('timeout')));
  });
}

describe('security: error answers', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ OPS_PROBE_INTERVAL_MS: '0' });
    await control(t, '/reset');
    await createTenant(t, 'exists');
    await createTenant(t, 'linked');
    await connectTenant(t, 'linked');
  });
  afterAll(async () => {
    await t.close();
  });

  describe('X-Request-Id on every answer', () => {
    it('on body-parser errors: 400 invalid_json, 413, 415', async () => {
      const bad = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .set('Content-Type', 'application/json')
        .send('{"id":')
        .expect(400);
      expect(bad.body.error.code).toBe('invalid_json');
      const big = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .send({ id: 'big', name: 'x'.repeat(1_100_000) })
        .expect(413);
      const type = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .set('Content-Type', 'text/plain')
        .send('id=x')
        .expect(415);
      for (const res of [bad, big, type]) expect(res.headers['x-request-id']).toMatch(UUID);
      // The caller's own id is kept, on errors too.
      const mine = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .set('X-Request-Id', 'caller-trace-42')
        .set('Content-Type', 'application/json')
        .send('{')
        .expect(400);
      expect(mine.headers['x-request-id']).toBe('caller-trace-42');
      // A hostile id is replaced, not echoed.
      const hostile = await request(t.baseUrl).get('/health/live').set('X-Request-Id', 'a b<script>');
      expect(hostile.headers['x-request-id']).toMatch(UUID);
    });

    it('on 404 of unknown routes, 401, 403, the sandbox and the pages', async () => {
      const answers = await Promise.all([
        request(t.baseUrl).get('/no/such/route').expect(404),
        request(t.baseUrl).post('/v1/nothing').set(op).send({}).expect(404),
        request(t.baseUrl).get('/v1/tenants/exists').expect(401),
        request(t.baseUrl)
          .get('/v1/tenants/exists')
          .set('Authorization', 'Bearer rgk_wrongwrongwrongwrong')
          .expect(401),
        request(t.baseUrl).get('/sandbox/api/v2/organizations'),
        request(t.baseUrl).post('/sandbox/oauth/token').send({}),
        request(t.baseUrl).get('/connect/not-a-token').expect(404),
        request(t.baseUrl).get('/health/live').expect(200),
      ]);
      for (const res of answers) expect(res.headers['x-request-id']).toMatch(UUID);
    });

    it('on a URL the router cannot decode: 400 bad_request naming the path, with the usual headers', async () => {
      for (const url of ['/v1/tenants/%E0%A4%A', '/ops/connections/%zz', '/no/such/%']) {
        const res = await request(t.baseUrl).get(url).set(op).expect(400);
        expect(res.body).toEqual({
          error: {
            code: 'bad_request',
            message: 'The request URL cannot be decoded.',
            details: [{ field: 'path', reason: 'a malformed percent-encoding' }],
          },
        });
        expect(res.headers['x-request-id']).toMatch(UUID);
        expect(res.headers['cache-control']).toBe('no-store');
      }
    });

    it("on Node's own protocol errors: a malformed request line (400) and oversized headers (431)", async () => {
      const malformed = await raw(t.baseUrl, 'GET / HTTP/1.1 nonsense\r\n\r\n');
      expect(malformed).toMatch(/^HTTP\/1\.1 400 /);
      expect(malformed).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/);
      expect(malformed).toMatch(/\r\nCache-Control: no-store\r\n/);
      expect(malformed).toContain('"code":"bad_request"');
      const huge = await raw(
        t.baseUrl,
        `GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      );
      expect(huge).toMatch(/^HTTP\/1\.1 431 /);
      expect(huge).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/);
      expect(huge).toContain('"code":"headers_too_large"');
    });
  });

  describe('tenant_not_found where the tenant in the path does not exist', () => {
    const ID = '00000000-0000-4000-8000-000000000000';
    // Always three columns: jest passes a `done` callback to a test function with more parameters than the row has.
    const routes: [string, string, Record<string, unknown> | null][] = [
      ['GET', '/v1/tenants/ghost', null],
      ['PATCH', '/v1/tenants/ghost', { name: 'x' }],
      ['POST', '/v1/tenants/ghost/api-keys', { name: 'svc' }],
      ['GET', '/v1/tenants/ghost/api-keys', null],
      ['DELETE', `/v1/tenants/ghost/api-keys/${ID}`, null],
      ['POST', '/v1/tenants/ghost/connect-sessions', {}],
      ['GET', '/v1/tenants/ghost/connection', null],
      ['GET', '/v1/tenants/ghost/connection?environment=sandbox', null],
      ['DELETE', '/v1/tenants/ghost/connection', null],
      ['GET', '/v1/tenants/ghost/fields', null],
      ['POST', '/v1/tenants/ghost/rewards', { rewards: [reward()] }],
      ['GET', '/v1/tenants/ghost/rewards', null],
      ['GET', '/v1/tenants/ghost/dispatches', null],
      ['GET', `/v1/tenants/ghost/dispatches/${ID}`, null],
    ];

    it.each(routes)('%s %s → 404 tenant_not_found (operator key)', async (method, path, body) => {
      const agent = request(t.baseUrl);
      let req = agent[method.toLowerCase() as 'get'](path).set(op).set('Idempotency-Key', 'ghost-1');
      if (body) req = req.send(body);
      const res = await req;
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('tenant_not_found');
      expect(res.headers['x-request-id']).toMatch(UUID);
    });

    it('a tenant that exists but has no connection keeps connection_not_found; with one, its status', async () => {
      const none = await request(t.baseUrl).get('/v1/tenants/exists/connection').set(op).expect(404);
      expect(none.body.error.code).toBe('connection_not_found');
      const fields = await request(t.baseUrl).get('/v1/tenants/exists/fields').set(op).expect(404);
      expect(fields.body.error.code).toBe('connection_not_found');
      const send = await request(t.baseUrl)
        .post('/v1/tenants/exists/rewards')
        .set(op)
        .set('Idempotency-Key', 'none-1')
        .send({ rewards: [reward()] })
        .expect(404);
      expect(send.body.error.code).toBe('connection_not_found');
      // …with where to start: a connect session for this tenant.
      for (const res of [none, fields, send])
        expect(res.body.error.message).toBe(
          'The tenant has no rewards connection for sandbox. To connect one, create a connect session ' +
            '(POST /v1/tenants/exists/connect-sessions) and open its connect_url in a browser.',
        );
      await request(t.baseUrl).get('/v1/tenants/linked/connection').set(op).expect(200);
      await request(t.baseUrl).get('/v1/tenants/exists/dispatches').set(op).expect(200);
    });

    it('a tenant key on another (or no) tenant: tenant_not_found, as before', async () => {
      const key = (
        await request(t.baseUrl).post('/v1/tenants/exists/api-keys').set(op).send({ name: 'svc' }).expect(201)
      ).body.key;
      for (const path of [
        '/v1/tenants/ghost/connection',
        '/v1/tenants/linked/connection',
        '/v1/tenants/ghost/fields',
      ]) {
        const res = await request(t.baseUrl).get(path).set('Authorization', `Bearer ${key}`).expect(404);
        expect(res.body.error.code).toBe('tenant_not_found');
      }
    });
  });

  describe('validation errors: one clear reason per field, nested paths', () => {
    it('one reason per field, the type before the size (a number for a string field says "must be a string")', async () => {
      const res = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .send({ id: 5, name: 7, return_urls: 'https://x.example.com', colour: 'red' })
        .expect(400);
      expect(res.body.error.code).toBe('validation_failed');
      const details = res.body.error.details as { field: string; reason: string }[];
      expect(details.map((d) => d.field).sort()).toEqual(['colour', 'id', 'name', 'return_urls']);
      expect(Object.fromEntries(details.map((d) => [d.field, d.reason]))).toEqual({
        colour: 'property colour is not allowed',
        id: 'id must be a string',
        name: 'name must be a string',
        return_urls: 'return_urls must be an array',
      });
    });

    it('a value of the right type with a bad format gets that reason, once', async () => {
      const res = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .send({ id: 'Not A Slug!', name: '', return_urls: ['ftp://x'] })
        .expect(400);
      const details = res.body.error.details as { field: string; reason: string }[];
      expect(details).toEqual([
        {
          field: 'id',
          reason: 'id must be a slug: lowercase letters, digits and inner dashes, 1–63 characters',
        },
        { field: 'name', reason: 'name must be longer than or equal to 1 characters' },
        { field: 'return_urls', reason: 'each return_urls entry must be an absolute http(s) URL' },
      ]);
    });

    it('nested fields are named by their path: rewards[0].recipient.email', async () => {
      const res = await request(t.baseUrl)
        .post('/v1/tenants/linked/rewards')
        .set(op)
        .set('Idempotency-Key', 'validation-nested')
        .send({
          rewards: [
            {
              ...reward(),
              recipient: { name: 5, email: 'not-an-email' },
              value: { denomination: 'ten', currency_code: 'usd' },
              products: [5],
            },
            { ...reward(), recipient: 'Ada', value: 3 },
          ],
        })
        .expect(400);
      const details = res.body.error.details as { field: string; reason: string }[];
      const byField = Object.fromEntries(details.map((d) => [d.field, d.reason]));
      expect(details).toHaveLength(Object.keys(byField).length); // one entry per field
      // The send body is checked by its JSON Schema (dto/send-rewards.dto.ts): each reason states the rule (its title).
      expect(byField).toEqual({
        'rewards[0].recipient.name': 'rewards[0].recipient.name must be a string of 1–255 characters',
        'rewards[0].recipient.email':
          'rewards[0].recipient.email must be an e-mail address of at most 254 characters',
        'rewards[0].value.denomination':
          'rewards[0].value.denomination must be a number from 0.01 to 1000000 with at most two decimals',
        'rewards[0].value.currency_code':
          'rewards[0].value.currency_code must be an ISO 4217 code such as USD',
        'rewards[0].products[0]': 'rewards[0].products[0] must be a product id of 1–200 characters',
        'rewards[1].recipient': 'rewards[1].recipient must be an object {name, email, phone}',
        'rewards[1].value': 'rewards[1].value must be an object {denomination, currency_code}',
      });
    });
  });
});
