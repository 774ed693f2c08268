import request from 'supertest';
import { ApiKeyGuard } from '../src/tenants/auth/api-key.guard';
import type { TestApp } from './support/app';
import { OPERATOR_KEY, startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward } from './support/send';

/**
 * The send route is answered on node:http ahead of Express and Nest (src/reward-dispatch/send.route.ts). These tests
 * hold it to what the Express + Nest path gives every other route: the same answer, headers, errors and log line.
 * `?via=nest` (any query string) leaves a send request to Express and Nest, which is how both paths are compared.
 */
describe('the send route ahead of Express and Nest', () => {
  let t: TestApp;
  let nestRouted: jest.SpyInstance;
  const body = { funding_source_id: 'FSDEMOMAIN', rewards: [reward()] };
  const post = (path: string, key: string) =>
    request(t.baseUrl).post(path).set(op).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    t = await startTestApp();
    await control(t, '/reset');
    await createTenant(t, 'direct');
    await createTenant(t, 'other');
    await connectTenant(t, 'direct');
    // Nest runs the global guard on every request it routes: the direct route never calls it.
    nestRouted = jest.spyOn(t.app.get(ApiKeyGuard), 'canActivate');
  });
  afterAll(async () => {
    nestRouted.mockRestore();
    await t.close();
  });
  beforeEach(() => nestRouted.mockClear());

  it('answers a send as the Nest controller does: status, body, headers — without Nest’s pipeline', async () => {
    const direct = await post('/v1/tenants/direct/rewards', 'route-direct').expect(201);
    expect(nestRouted).not.toHaveBeenCalled();
    const nest = await post('/v1/tenants/direct/rewards?via=nest', 'route-nest').expect(201);
    expect(nestRouted).toHaveBeenCalledTimes(1);

    const shape = (b: Record<string, unknown>) => Object.keys(b).sort();
    expect(shape(direct.body)).toEqual(shape(nest.body));
    expect(direct.body).toMatchObject({ status: 'sent', idempotency_key: 'route-direct' });
    expect(nest.body).toMatchObject({ status: 'sent', idempotency_key: 'route-nest' });
    // The headers every answer carries, the same on both paths (ids and lengths aside).
    for (const name of [
      'content-type',
      'cache-control',
      'content-security-policy',
      'x-content-type-options',
      'x-frame-options',
      'referrer-policy',
      'cross-origin-opener-policy',
      'cross-origin-resource-policy',
    ]) {
      expect([name, direct.headers[name]]).toEqual([name, nest.headers[name]]);
      expect(direct.headers[name]).toBeDefined();
    }
    expect(direct.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number(direct.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(direct.body)));
  });

  it('replays with Idempotent-Replayed, and 422 for the same key with another body', async () => {
    const replay = await post('/v1/tenants/direct/rewards', 'route-direct').expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const reused = await request(t.baseUrl)
      .post('/v1/tenants/direct/rewards')
      .set(op)
      .set('Idempotency-Key', 'route-direct')
      .send({ ...body, external_reference: 'another' })
      .expect(422);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
    expect(nestRouted).not.toHaveBeenCalled();
  });

  it('a 202 for Prefer: respond-async, with its Location', async () => {
    const res = await post('/v1/tenants/direct/rewards', 'route-async')
      .set('Prefer', 'respond-async')
      .expect(202);
    expect(res.headers.location).toBe(`/v1/tenants/direct/dispatches/${res.body.id}`);
  });

  it('refuses a wrong key from the headers alone: 401 in the one error shape, the connection closed', async () => {
    const res = await request(t.baseUrl)
      .post('/v1/tenants/direct/rewards')
      .set('Authorization', `Bearer rgo_wrong_${'y'.repeat(40)}`)
      .set('Idempotency-Key', 'route-401')
      .send(body)
      .expect(401);
    expect(res.body).toEqual({
      error: { code: 'invalid_api_key', message: expect.any(String), details: [] },
    });
    expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(res.headers.connection).toBe('close');
    expect(res.headers['x-request-id']).toBeDefined();
    expect(res.headers['content-security-policy']).toBeDefined();
  });

  it('a tenant key reaches only its own tenant; an unknown tenant is tenant_not_found', async () => {
    const key = (
      await request(t.baseUrl).post('/v1/tenants/other/api-keys').set(op).send({ name: 'svc' }).expect(201)
    ).body.key as string;
    for (const tenant of ['direct', 'ghost']) {
      const res = await request(t.baseUrl)
        .post(`/v1/tenants/${tenant}/rewards`)
        .set('Authorization', `Bearer ${key}`)
        .set('Idempotency-Key', `route-${tenant}`)
        .send(body)
        .expect(404);
      expect(res.body.error.code).toBe('tenant_not_found');
    }
    const ghost = await post('/v1/tenants/ghost/rewards', 'route-ghost').expect(404);
    expect(ghost.body.error.code).toBe('tenant_not_found');
  });

  it('applies the body rules of jsonBody and the schema: 415, 413 before reading, 400 naming the field', async () => {
    const text = await request(t.baseUrl)
      .post('/v1/tenants/direct/rewards')
      .set(op)
      .set('Idempotency-Key', 'route-415')
      .set('Content-Type', 'text/plain')
      .send('rewards')
      .expect(415);
    expect(text.body.error.code).toBe('unsupported_media_type');
    const big = await request(t.baseUrl)
      .post('/v1/tenants/direct/rewards')
      .set(op)
      .set('Idempotency-Key', 'route-413')
      .set('Content-Type', 'application/json')
      .send(`{"rewards": ["${'x'.repeat(8 * 1024 * 1024)}"]}`)
      .expect(413);
    expect(big.body.error.code).toBe('payload_too_large');
    expect(big.headers.connection).toBe('close');
    const bad = await request(t.baseUrl)
      .post('/v1/tenants/direct/rewards')
      .set(op)
      .set('Idempotency-Key', 'route-400')
      .send({ rewards: [reward({ recipient: { name: 'Ada', email: 'nope' } })] })
      .expect(400);
    expect(bad.body.error.code).toBe('validation_failed');
    expect(bad.body.error.details.map((d: { field: string }) => d.field)).toEqual([
      'rewards[0].recipient.email',
    ]);
    const missing = await request(t.baseUrl)
      .post('/v1/tenants/direct/rewards')
      .set(op)
      .send(body)
      .expect(400);
    expect(missing.body.error.code).toBe('idempotency_key_missing');
  });

  it('logs each send as pino-http logs other requests: request id, status, the Authorization header redacted', async () => {
    await post('/v1/tenants/direct/rewards', 'route-log').set('X-Request-Id', 'send-route-log-1').expect(201);
    await request(t.baseUrl)
      .post('/v1/tenants/direct/rewards')
      .set(op)
      .set('X-Request-Id', 'send-route-log-2')
      .send(body)
      .expect(400);
    await new Promise((r) => setTimeout(r, 50));
    const lineOf = (id: string) => {
      const line = t.logs.find((l) => l.includes(id));
      expect(line).toBeDefined();
      return JSON.parse(line as string) as {
        level: number;
        msg: string;
        req: { id: string; method: string; url: string; headers: Record<string, string> };
        res: { statusCode: number };
        responseTime: number;
      };
    };
    const ok = lineOf('send-route-log-1');
    expect(ok).toMatchObject({
      level: 30,
      msg: 'request completed',
      req: { id: 'send-route-log-1', method: 'POST', url: '/v1/tenants/direct/rewards' },
      res: { statusCode: 201 },
    });
    expect(ok.req.headers.authorization).toBe('[REDACTED]');
    expect(typeof ok.responseTime).toBe('number');
    expect(lineOf('send-route-log-2')).toMatchObject({ level: 40, res: { statusCode: 400 } });
    expect(t.logs.join('\n')).not.toContain(OPERATOR_KEY);
  });

  it('leaves other methods and paths to Express and Nest', async () => {
    await request(t.baseUrl).get('/v1/tenants/direct/rewards').set(op).expect(200);
    const put = await request(t.baseUrl).put('/v1/tenants/direct/rewards').set(op).send(body).expect(404);
    expect(put.body.error.code).toBe('not_found');
    expect(nestRouted).toHaveBeenCalledTimes(1); // the listing, routed by Nest
  });
});
