import { MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import request from 'supertest';
import { PUBLIC_ROUTE } from '../src/tenants/auth/principal';
import type { TestApp } from './support/app';
import { OPERATOR_KEY, startTestApp } from './support/app';

describe('foundation: tenants, API keys, errors, health, docs', () => {
  let t: TestApp;
  const op = { Authorization: `Bearer ${OPERATOR_KEY}` };

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.close();
  });

  async function createTenantWithKey(id: string): Promise<string> {
    await request(t.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .send({ id, name: `Tenant ${id}` })
      .expect(201);
    const res = await request(t.baseUrl)
      .post(`/v1/tenants/${id}/api-keys`)
      .set(op)
      .send({ name: 'svc' })
      .expect(201);
    return res.body.key as string;
  }

  it('answers liveness and readiness (database checked)', async () => {
    await request(t.baseUrl).get('/health/live').expect(200, { status: 'ok' });
    const ready = await request(t.baseUrl).get('/health/ready').expect(200);
    expect(ready.body.info.database.status).toBe('up');
  });

  it('creates a tenant and reads it back; a duplicate id is a 409', async () => {
    const created = await request(t.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .send({ id: 'acme', name: 'Acme', return_urls: ['https://platform.example.com/done'] })
      .expect(201);
    expect(created.body).toMatchObject({
      id: 'acme',
      name: 'Acme',
      return_urls: ['https://platform.example.com/done'],
    });
    const read = await request(t.baseUrl).get('/v1/tenants/acme').set(op).expect(200);
    expect(read.body.created_at).toEqual(created.body.created_at);
    const dup = await request(t.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .send({ id: 'acme', name: 'Again' })
      .expect(409);
    expect(dup.body.error.code).toBe('tenant_exists');
  });

  it('names every bad field, and rejects unknown properties', async () => {
    const res = await request(t.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .send({ id: 'Not A Slug!', name: '', return_urls: ['ftp://x'], colour: 'red' })
      .expect(400);
    expect(res.body.error.code).toBe('validation_failed');
    const fields = (res.body.error.details as { field: string }[]).map((d) => d.field);
    expect(fields).toEqual(expect.arrayContaining(['id', 'name', 'return_urls', 'colour']));
  });

  it('gives the plaintext key once, stores only its hash, and the key works', async () => {
    const key = await createTenantWithKey('keyed');
    expect(key).toMatch(/^rgk_[A-Za-z0-9_-]{43}$/);
    await request(t.baseUrl).get('/v1/tenants/keyed').set('Authorization', `Bearer ${key}`).expect(200);
    const list = await request(t.baseUrl).get('/v1/tenants/keyed/api-keys').set(op).expect(200);
    expect(JSON.stringify(list.body)).not.toContain(key);
    const { Client } = await import('pg');
    const db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
    const rows = await db.query('SELECT * FROM api_keys');
    await db.end();
    expect(JSON.stringify(rows.rows)).not.toContain(key.slice(8));
  });

  it('isolates tenants both ways: another tenant answers 404, like one that does not exist', async () => {
    const keyA = await createTenantWithKey('tenant-a');
    const keyB = await createTenantWithKey('tenant-b');
    const a = { Authorization: `Bearer ${keyA}` };
    const b = { Authorization: `Bearer ${keyB}` };
    await request(t.baseUrl).get('/v1/tenants/tenant-a').set(a).expect(200);
    await request(t.baseUrl).get('/v1/tenants/tenant-b').set(b).expect(200);
    const aToB = await request(t.baseUrl).get('/v1/tenants/tenant-b').set(a).expect(404);
    const bToA = await request(t.baseUrl).get('/v1/tenants/tenant-a/api-keys').set(b).expect(404);
    const missing = await request(t.baseUrl).get('/v1/tenants/nobody').set(a).expect(404);
    expect(aToB.body.error.code).toBe('tenant_not_found');
    expect(bToA.body.error.code).toBe('tenant_not_found');
    expect(missing.body.error).toEqual({ ...aToB.body.error, message: missing.body.error.message });
  });

  it('keeps operator operations from tenant keys (403) and unknown callers out (401)', async () => {
    const key = await createTenantWithKey('limited');
    const res = await request(t.baseUrl)
      .post('/v1/tenants/limited/api-keys')
      .set('Authorization', `Bearer ${key}`)
      .send({ name: 'escalate' })
      .expect(403);
    expect(res.body.error.code).toBe('operator_key_required');
    await request(t.baseUrl)
      .post('/v1/tenants')
      .set('Authorization', `Bearer ${key}`)
      .send({ id: 'x', name: 'x' })
      .expect(403);
    const none = await request(t.baseUrl).get('/v1/tenants/limited').expect(401);
    expect(none.body.error.code).toBe('missing_api_key');
    expect(none.headers['www-authenticate']).toContain('Bearer');
    // `Authorization: Bearer $KEY` with $KEY unset: said to be empty, in the same family as no key at all.
    for (const header of ['Bearer ', 'Bearer', 'bearer   ']) {
      const empty = await request(t.baseUrl)
        .get('/v1/tenants/limited')
        .set('Authorization', header)
        .expect(401);
      expect(empty.body.error.code).toBe('missing_api_key');
      expect(empty.body.error.message).toMatch(/^The API key is empty/);
    }
    // The send route authenticates through the same guard.
    const emptySend = await request(t.baseUrl)
      .post('/v1/tenants/limited/rewards')
      .set('Authorization', 'Bearer ')
      .set('Idempotency-Key', 'empty-key')
      .send({ rewards: [] })
      .expect(401);
    expect(emptySend.body.error.code).toBe('missing_api_key');
    expect(emptySend.body.error.message).toMatch(/^The API key is empty/);
    const wrong = await request(t.baseUrl)
      .get('/v1/tenants/limited')
      .set('Authorization', 'Bearer rgk_wrongwrongwrongwrong')
      .expect(401);
    expect(wrong.body.error.code).toBe('invalid_api_key');
    await request(t.baseUrl).get('/v1/tenants/limited').set('Authorization', 'Basic abc').expect(401);
  });

  it('revokes a key: it stops working at once on this instance', async () => {
    const key = await createTenantWithKey('revoking');
    await request(t.baseUrl).get('/v1/tenants/revoking').set('Authorization', `Bearer ${key}`).expect(200);
    const list = await request(t.baseUrl).get('/v1/tenants/revoking/api-keys').set(op).expect(200);
    await request(t.baseUrl).delete(`/v1/tenants/revoking/api-keys/${list.body[0].id}`).set(op).expect(204);
    await request(t.baseUrl).get('/v1/tenants/revoking').set('Authorization', `Bearer ${key}`).expect(401);
    const again = await request(t.baseUrl)
      .delete(`/v1/tenants/revoking/api-keys/${list.body[0].id}`)
      .set(op)
      .expect(404);
    expect(again.body.error.code).toBe('api_key_not_found');
    await request(t.baseUrl).delete('/v1/tenants/revoking/api-keys/not-a-uuid').set(op).expect(404);
  });

  it('creates operator keys that reach every tenant', async () => {
    const { ApiKeysService } = await import('../src/tenants/api-keys.service');
    const created = await t.app.get(ApiKeysService).create(null, 'ops-cli');
    expect(created.key).toMatch(/^rgo_/);
    await request(t.baseUrl)
      .get('/v1/tenants/acme')
      .set('Authorization', `Bearer ${created.key}`)
      .expect(200);
  });

  describe('bad input is a clear 4xx in the one error shape, never a 500', () => {
    it('malformed JSON → 400 invalid_json', async () => {
      const res = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .set('Content-Type', 'application/json')
        .send('{"id": "x",')
        .expect(400);
      expect(res.body).toEqual({
        error: {
          code: 'invalid_json',
          message: expect.any(String),
          details: [{ field: 'body', reason: 'not valid JSON' }],
        },
      });
    });
    it('a wrong content type → 415 naming the header', async () => {
      const res = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .set('Content-Type', 'text/plain')
        .send('id=x')
        .expect(415);
      expect(res.body.error.code).toBe('unsupported_media_type');
      expect(res.body.error.details[0].field).toBe('Content-Type');
    });
    it('a body over 1 MiB → 413', async () => {
      const res = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .send({ id: 'big', name: 'x'.repeat(1_100_000) })
        .expect(413);
      expect(res.body.error.code).toBe('payload_too_large');
    });
    it('an unknown route → 404 not_found', async () => {
      const res = await request(t.baseUrl).get('/v1/nothing-here').set(op).expect(404);
      expect(res.body.error.code).toBe('not_found');
      const anon = await request(t.baseUrl).get('/no/such/path').expect(404);
      expect(anon.body.error.code).toBe('not_found');
    });
    it('a JSON array or scalar instead of an object → 400', async () => {
      const res = await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .set('Content-Type', 'application/json')
        .send('[1,2]');
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBeDefined();
    });
  });

  it('serves OpenAPI at /docs describing every route', async () => {
    await request(t.baseUrl).get('/docs').expect(200).expect('Content-Type', /html/);
    const doc = await request(t.baseUrl).get('/docs/openapi.json').expect(200);
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/v1/tenants',
        '/v1/tenants/{tenant}',
        '/v1/tenants/{tenant}/api-keys',
        '/v1/tenants/{tenant}/connect-sessions',
        '/v1/tenants/{tenant}/connection',
        '/v1/tenants/{tenant}/fields',
        '/v1/tenants/{tenant}/rewards',
        '/v1/tenants/{tenant}/dispatches/{id}',
        '/v1/ops/connections',
        '/v1/ops/connections/{id}/check',
        '/health/ready',
        '/metrics',
      ]),
    );
    const schemas = doc.body.components.schemas;
    expect(schemas.CreateTenantDto.properties).toHaveProperty('return_urls');
    const send = doc.body.paths['/v1/tenants/{tenant}/rewards'].post;
    expect(send.requestBody.content['application/json'].schema.properties).toHaveProperty('rewards');
    expect(schemas.DispatchResponse.properties).toHaveProperty('upstream_order_id');
    expect(schemas.ConnectionHealthResponse.properties).toHaveProperty('health');
  });

  it('logs a request id per request and never the Authorization header', async () => {
    const res = await request(t.baseUrl)
      .get('/v1/tenants/acme')
      .set(op)
      .set('X-Request-Id', 'trace-me-123')
      .expect(200);
    expect(res.headers['x-request-id']).toBe('trace-me-123');
    await new Promise((r) => setTimeout(r, 50));
    const line = t.logs.find((l) => l.includes('trace-me-123'));
    expect(line).toBeDefined();
    expect(JSON.parse(line as string).req.headers.authorization).toBe('[REDACTED]');
    expect(t.logs.join('\n')).not.toContain(OPERATOR_KEY);
  });

  it('lists exactly which routes are public', () => {
    const modules = t.app.get(ModulesContainer);
    const scanner = new MetadataScanner();
    const reflector = t.app.get(Reflector);
    const publicRoutes: string[] = [];
    const controllers = [...modules.values()].flatMap((m) => [...m.controllers.values()]);
    for (const wrapper of controllers) {
      const proto = Object.getPrototypeOf(wrapper.instance) as object;
      for (const name of scanner.getAllMethodNames(proto)) {
        const handler = (proto as Record<string, unknown>)[name] as () => unknown;
        if (
          reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, [handler, wrapper.metatype as () => unknown])
        ) {
          publicRoutes.push(`${wrapper.name}.${name}`);
        }
      }
    }
    expect(publicRoutes.sort()).toEqual([
      'ConnectFlowController.authorize',
      'ConnectFlowController.callback',
      'ConnectFlowController.page',
      'DeliveryWebhookIntake.receive',
      'HealthController.live',
      'HealthController.ready',
      'HomeController.home',
      'OpsController.scrape',
    ]);
  });
});
