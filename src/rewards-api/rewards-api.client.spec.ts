import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RewardsEnvironmentConfig } from '../config/app-config';
import { ManualClock } from '../../test/support/clock';
import { RewardsApiClient, retryAfterSeconds } from './rewards-api.client';
import { RewardsApiError } from './rewards-api.errors';

/**
 * The client against a misbehaving upstream over real HTTP: the answers the sandbox is too well-behaved to give
 * (huge bodies, a body that stalls after the headers, redirects, HTML error pages).
 */
describe('RewardsApiClient against a hostile upstream', () => {
  let server: Server;
  let env: RewardsEnvironmentConfig;
  let handler: (req: IncomingMessage, res: ServerResponse) => void;
  const seen: IncomingMessage[] = [];
  const clock = new ManualClock();
  const client = new RewardsApiClient(clock);

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req);
      handler(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    env = {
      baseUrl: `http://127.0.0.1:${port}`,
      clientId: 'id',
      clientSecret: 'secret',
    } as RewardsEnvironmentConfig;
  });
  afterAll(async () => {
    await client.onModuleDestroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const failure = async (promise: Promise<unknown>): Promise<RewardsApiError> => {
    const error = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RewardsApiError);
    return error as RewardsApiError;
  };

  it('returns a 2xx answer with its JSON body and sends the bearer token', async () => {
    handler = (_req, res) =>
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"order":{"id":"o1"}}');
    const res = await client.call<{ order: { id: string } }>(env, 'tok', 'POST', '/orders', { a: 1 }, 2_000);
    expect(res.status).toBe(200);
    expect(res.body.order.id).toBe('o1');
    expect(seen.at(-1)?.headers.authorization).toBe('Bearer tok');
    expect(seen.at(-1)?.headers['content-type']).toBe('application/json');
  });

  it('cuts off an answer over 16 MiB as a network error whose outcome is unknown', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      for (let i = 0; i < 17; i++) res.write(chunk);
      res.end();
    };
    const error = await failure(client.call(env, 'tok', 'GET', '/rewards', undefined, 5_000));
    expect(error.kind).toBe('transient');
    expect(error.outcomeUnknown).toBe(true);
  });

  it('gives up on a body that stalls after the headers, within the timeout', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"order":');
    };
    const started = Date.now();
    const error = await failure(client.call(env, 'tok', 'POST', '/orders', {}, 300));
    expect(error.kind).toBe('transient');
    expect(error.outcomeUnknown).toBe(true);
    expect(error.message).toBe('no answer within 300 ms');
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('does not follow a redirect (a token must not travel to another host)', async () => {
    handler = (_req, res) => res.writeHead(302, { Location: 'http://127.0.0.1:9/steal' }).end();
    const error = await failure(client.call(env, 'tok', 'GET', '/organizations', undefined, 2_000));
    expect(error.kind).toBe('rejected');
    expect(error.status).toBe(302);
  });

  it('classifies an HTML 502 as transient and keeps the start of the page, and reads Retry-After on 429', async () => {
    handler = (_req, res) =>
      res.writeHead(502, { 'Content-Type': 'text/html' }).end('<html>bad gateway</html>');
    const bad = await failure(client.call(env, 'tok', 'GET', '/fields', undefined, 2_000));
    expect(bad.kind).toBe('transient');
    expect(bad.body).toEqual({ raw: '<html>bad gateway</html>' });
    handler = (_req, res) =>
      res.writeHead(429, { 'Retry-After': '7', 'Content-Type': 'application/json' }).end('{}');
    const limited = await failure(client.call(env, 'tok', 'GET', '/fields', undefined, 2_000));
    expect(limited.retryAfterSeconds).toBe(7);
  });

  it('sends the refresh as a form and never echoes the client secret in its errors', async () => {
    let form = '';
    handler = (req, res) => {
      req.setEncoding('utf8');
      req.on('data', (d: string) => (form += d));
      req.on('end', () =>
        res.writeHead(400, { 'Content-Type': 'application/json' }).end('{"error":"invalid_grant"}'),
      );
    };
    const error = await failure(client.refreshToken(env, 'rt-1', 2_000));
    expect(error.kind).toBe('invalid_grant');
    expect(new URLSearchParams(form).get('refresh_token')).toBe('rt-1');
    expect(seen.at(-1)?.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(JSON.stringify({ message: error.message, body: error.body })).not.toContain('secret');
  });

  it('dates a token without created_at, and a Retry-After date, on its own clock', async () => {
    handler = (_req, res) =>
      res
        .writeHead(200, { 'Content-Type': 'application/json' })
        .end('{"access_token":"at","refresh_token":"rt","expires_in":60}');
    const tokens = await client.refreshToken(env, 'rt-1', 2_000);
    expect(tokens.issuedAt.getTime()).toBe(clock.now());
    expect(tokens.expiresAt.getTime()).toBe(clock.now() + 60_000);
    const in30s = new Date(clock.now() + 30_000).toUTCString();
    handler = (_req, res) =>
      res.writeHead(429, { 'Retry-After': in30s, 'Content-Type': 'application/json' }).end('{}');
    const limited = await failure(client.call(env, 'tok', 'GET', '/fields', undefined, 2_000));
    expect(limited.retryAfterSeconds).toBe(30);
  });
});

describe('retryAfterSeconds: a Retry-After header', () => {
  const now = Date.UTC(2030, 0, 1, 12, 0, 0);

  it('reads delay-seconds as they are, never below zero', () => {
    expect(retryAfterSeconds('7', now)).toBe(7);
    expect(retryAfterSeconds('-3', now)).toBe(0);
  });

  it('counts an HTTP date from now, rounding up; a date already past is no wait', () => {
    expect(retryAfterSeconds('Tue, 01 Jan 2030 12:00:30 GMT', now)).toBe(30);
    expect(retryAfterSeconds('Tue, 01 Jan 2030 12:00:30 GMT', now + 500)).toBe(30);
    expect(retryAfterSeconds('Tue, 01 Jan 2030 11:59:00 GMT', now)).toBe(0);
  });

  it('is null when absent or unreadable', () => {
    expect(retryAfterSeconds(undefined, now)).toBeNull();
    expect(retryAfterSeconds('soon', now)).toBeNull();
  });
});
