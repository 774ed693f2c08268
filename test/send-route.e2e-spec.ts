import type { Server } from 'node:http';
import type {
  ArgumentMetadata,
  CallHandler,
  CanActivate,
  ExecutionContext,
  NestInterceptor,
  PipeTransform,
} from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tap } from 'rxjs';
import request from 'supertest';
import { ApiKeyGuard } from '../src/tenants/auth/api-key.guard';
import type { TestApp } from './support/app';
import { OPERATOR_KEY, startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward } from './support/send';

/** Which of the test's global steps a request went through, by request id. */
type Step = 'middleware' | 'guard' | 'interceptor' | 'pipe:body' | 'interceptor:after';
const seen = new Map<string, Step[]>();
const mark = (req: { id?: unknown }, step: Step) => {
  const id = String(req.id);
  seen.set(id, [...(seen.get(id) ?? []), step]);
};

class RecordingGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    mark(context.switchToHttp().getRequest(), 'guard');
    return true;
  }
}
class RecordingInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler) {
    const req = context.switchToHttp().getRequest();
    mark(req, 'interceptor');
    return next.handle().pipe(tap(() => mark(req, 'interceptor:after')));
  }
}
/** Global pipes see every parameter, not the request: the body names it (external_reference, or name). */
class RecordingPipe implements PipeTransform {
  transform(value: unknown, metadata: ArgumentMetadata): unknown {
    if (metadata.type === 'body' && value && typeof value === 'object') {
      const named = value as { external_reference?: unknown; name?: unknown };
      const id = named.external_reference ?? named.name;
      if (typeof id === 'string') mark({ id }, 'pipe:body');
    }
    return value;
  }
}

/**
 * The send route is an ordinary route of the framework: the same request pipeline as every other route — request id,
 * security headers, the API-key guard, body limits, pipes, interceptors, the error filter, the request-scoped log
 * context. These tests add global steps of every kind to a real app and check that a send passes through each of
 * them, whatever the spelling of its path, as another route does; and that nothing answers ahead of the framework.
 */
describe('the send route runs the one request pipeline', () => {
  let t: TestApp;
  let nestGuard: jest.SpyInstance;
  const body = { funding_source_id: 'FSDEMOMAIN', rewards: [reward()] };
  const post = (path: string, key: string) =>
    request(t.baseUrl).post(path).set(op).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    t = await startTestApp(
      {},
      {
        configure: (app) => {
          app.use((req: IncomingMessage, _res: ServerResponse, next: () => void) => {
            mark(req as { id?: unknown }, 'middleware');
            next();
          });
          app.useGlobalGuards(new RecordingGuard());
          app.useGlobalInterceptors(new RecordingInterceptor());
          app.useGlobalPipes(new RecordingPipe());
        },
      },
    );
    await control(t, '/reset');
    await createTenant(t, 'pl');
    await createTenant(t, 'other');
    await connectTenant(t, 'pl');
    nestGuard = jest.spyOn(t.app.get(ApiKeyGuard), 'canActivate');
  });
  afterAll(async () => {
    nestGuard.mockRestore();
    await t.close();
  });
  beforeEach(() => nestGuard.mockClear());

  it('has no request listener ahead of the framework: the HTTP server hands every request to Fastify', () => {
    const server = t.app.getHttpServer() as Server;
    expect(server.listeners('request')).toEqual([t.app.getHttpAdapter().getInstance().routing]);
  });

  // Every spelling the router routes to the send handler: letter case, a trailing slash, a query string.
  const spellings = [
    '/v1/tenants/pl/rewards',
    '/v1/tenants/pl/rewards/',
    '/v1/tenants/pl/rewards?via=query',
    '/V1/TENANTS/pl/REWARDS',
    '/v1/Tenants/pl/Rewards/?a=b',
  ];

  it.each(spellings.map((path, i) => [path, i]))(
    '%s: a send passes through every global middleware, guard, interceptor and pipe, as another route does',
    async (path, i) => {
      const id = `pipeline-${i}`;
      const res = await request(t.baseUrl)
        .post(path)
        .set(op)
        .set('X-Request-Id', id)
        .set('Idempotency-Key', id)
        .send({ ...body, external_reference: id })
        .expect(201);
      expect(res.body).toMatchObject({ status: 'sent', idempotency_key: id, external_reference: id });
      expect(res.headers['x-request-id']).toBe(id);
      expect(seen.get(id)).toEqual(['middleware', 'guard', 'interceptor', 'pipe:body', 'interceptor:after']);
      expect(nestGuard).toHaveBeenCalledTimes(1); // the app's own API-key guard

      // Another route with a body, for comparison: the same steps, in the same order.
      const other = `pipeline-other-${i}`;
      await request(t.baseUrl)
        .post('/v1/tenants/other/api-keys')
        .set(op)
        .set('X-Request-Id', other)
        .send({ name: other })
        .expect(201);
      expect(seen.get(other)).toEqual(seen.get(id));
    },
  );

  it.each(spellings)('%s: the same answers, headers and limits as every other spelling', async (path) => {
    const tag = Buffer.from(path).toString('hex');
    const ok = await post(path, `same-${tag}`).expect(201);
    // The headers every answer carries.
    for (const name of [
      'content-type',
      'cache-control',
      'content-security-policy',
      'x-content-type-options',
      'x-frame-options',
      'referrer-policy',
      'cross-origin-opener-policy',
      'cross-origin-resource-policy',
    ])
      expect([name, ok.headers[name]]).toEqual([name, expect.any(String)]);
    expect(ok.headers['cache-control']).toBe('no-store');
    expect(ok.headers['x-powered-by']).toBeUndefined();
    expect(Number(ok.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(ok.body)));
    const replay = await post(path, `same-${tag}`).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(ok.body.id);

    // The send route's body limit (8 MiB) on every spelling, not the 1 MiB of other routes: 2 MiB is read.
    const twoMiB = await request(t.baseUrl)
      .post(path)
      .set(op)
      .set('Idempotency-Key', `big-${tag}`)
      .set('Content-Type', 'application/json')
      .send(`{"rewards": ["${'x'.repeat(2 * 1024 * 1024)}"]}`)
      .expect(400);
    expect(twoMiB.body.error.code).toBe('validation_failed'); // read and parsed, then refused by the limits walk
    const tooBig = await request(t.baseUrl)
      .post(path)
      .set(op)
      .set('Idempotency-Key', `too-big-${tag}`)
      .set('Content-Type', 'application/json')
      .send(`{"rewards": ["${'x'.repeat(8 * 1024 * 1024)}"]}`)
      .expect(413);
    expect(tooBig.body.error.code).toBe('payload_too_large');
    expect(tooBig.body.error.message).toBe('The request body is larger than 8 MiB.');

    // Errors go through the one filter: the one shape, with the request id and the security headers.
    const bad = await request(t.baseUrl)
      .post(path)
      .set(op)
      .set('Idempotency-Key', `bad-${tag}`)
      .send({ rewards: [reward({ recipient: { name: 'Ada', email: 'nope' } })] })
      .expect(400);
    expect(bad.body).toEqual({
      error: {
        code: 'validation_failed',
        message: expect.any(String),
        details: [{ field: 'rewards[0].recipient.email', reason: expect.any(String) }],
      },
    });
    expect(bad.headers['x-request-id']).toBeDefined();
    expect(bad.headers['content-security-policy']).toBeDefined();
  });

  it('a 202 for Prefer: respond-async, with its Location', async () => {
    const res = await post('/v1/tenants/pl/rewards', 'route-async')
      .set('Prefer', 'respond-async')
      .expect(202);
    expect(res.headers.location).toBe(`/v1/tenants/pl/dispatches/${res.body.id}`);
  });

  it('the same key with another body → 422 idempotency_key_reused', async () => {
    await post('/v1/tenants/pl/rewards', 'route-reuse').expect(201);
    const reused = await request(t.baseUrl)
      .post('/v1/tenants/pl/rewards')
      .set(op)
      .set('Idempotency-Key', 'route-reuse')
      .send({ ...body, external_reference: 'another' })
      .expect(422);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
  });

  it('refuses a wrong key from the headers alone: 401 in the one error shape, the connection closed', async () => {
    const res = await request(t.baseUrl)
      .post('/v1/tenants/pl/rewards')
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
    for (const tenant of ['pl', 'ghost']) {
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

  it('applies the body rules: 415, 413 before reading, a missing Idempotency-Key', async () => {
    const text = await request(t.baseUrl)
      .post('/v1/tenants/pl/rewards')
      .set(op)
      .set('Idempotency-Key', 'route-415')
      .set('Content-Type', 'text/plain')
      .send('rewards')
      .expect(415);
    expect(text.body.error.code).toBe('unsupported_media_type');
    const declared = await request(t.baseUrl)
      .post('/v1/tenants/pl/rewards')
      .set(op)
      .set('Idempotency-Key', 'route-413')
      .set('Content-Type', 'application/json')
      .send(`{"rewards": ["${'x'.repeat(9 * 1024 * 1024)}"]}`)
      .expect(413);
    expect(declared.body.error.code).toBe('payload_too_large');
    expect(declared.headers.connection).toBe('close');
    const missing = await request(t.baseUrl).post('/v1/tenants/pl/rewards').set(op).send(body).expect(400);
    expect(missing.body.error.code).toBe('idempotency_key_missing');
  });

  it('logs each send as every request is logged: request id, status, the Authorization header redacted', async () => {
    await post('/v1/tenants/pl/rewards', 'route-log').set('X-Request-Id', 'send-route-log-1').expect(201);
    await request(t.baseUrl)
      .post('/v1/tenants/pl/rewards')
      .set(op)
      .set('X-Request-Id', 'send-route-log-2')
      .send(body)
      .expect(400);
    await new Promise((r) => setTimeout(r, 50));
    const ok = completedLine(t, 'send-route-log-1');
    expect(ok).toMatchObject({
      level: 30,
      msg: 'request completed',
      req: { id: 'send-route-log-1', method: 'POST', url: '/v1/tenants/pl/rewards' },
      res: { statusCode: 201 },
    });
    expect(ok.req.headers.authorization).toBe('[REDACTED]');
    expect(typeof ok.responseTime).toBe('number');
    expect(completedLine(t, 'send-route-log-2')).toMatchObject({ level: 40, res: { statusCode: 400 } });
    expect(t.logs.join('\n')).not.toContain(OPERATOR_KEY);
  });

  it('a line the dispatch sender logs during a send carries that request’s id (the request-scoped log context)', async () => {
    // The rewards service answers the order 409 (another order holds its external_id): the sender logs it as an
    // error while it handles the request.
    await control(t, '/faults', { route: 'orders', status: 409, times: 1 });
    const res = await post('/v1/tenants/pl/rewards', 'route-log-context').set(
      'X-Request-Id',
      'send-log-context',
    );
    expect(res.status).toBe(422);
    await new Promise((r) => setTimeout(r, 50));
    const lines = t.logs.map((l) => JSON.parse(l) as LogLine);
    const signal = lines.filter((l) => String(l.msg).includes('BUG SIGNAL'));
    expect(signal).toHaveLength(1);
    expect(signal[0]).toMatchObject({ context: 'DispatchSender', req: { id: 'send-log-context' } });
  });

  it('leaves other methods to their own routes', async () => {
    await request(t.baseUrl).get('/v1/tenants/pl/rewards').set(op).expect(200);
    const put = await request(t.baseUrl).put('/v1/tenants/pl/rewards').set(op).send(body).expect(404);
    expect(put.body.error.code).toBe('not_found');
  });
});

interface LogLine {
  level: number;
  msg: string;
  context?: string;
  req: { id: string; method: string; url: string; headers: Record<string, string> };
  res: { statusCode: number };
  responseTime: number;
}

function completedLine(t: TestApp, id: string): LogLine {
  const line = t.logs
    .map((l) => JSON.parse(l) as LogLine)
    .find((l) => l.req?.id === id && l.responseTime !== undefined);
  expect(line).toBeDefined();
  return line as LogLine;
}
