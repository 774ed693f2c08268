import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Logger as NestLogger } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Request } from 'express';
import { PinoLogger } from 'nestjs-pino';
import proxyaddr from 'proxy-addr';
import { toErrorResponse } from '../common/http-exception.filter';
import { NO_BODY, SEND_LIMITS, readJsonBody } from '../common/json-body';
import { REQUEST_ID_HEADER, requestIdOf } from '../common/request-id';
import type { AppConfig } from '../config/app-config';
import { ApiKeyGuard } from '../tenants/auth/api-key.guard';
import type { HttpOutcome } from './dispatch.sender';
import { SendBodyPipe } from './dto/send-body.pipe';
import { RewardDispatchService } from './reward-dispatch.service';

/** `POST /v1/tenants/{tenant}/rewards` exactly (a query string, another method or path: Express and Nest). */
const SEND_PATH = /^\/v1\/tenants\/([^/?#]+)\/rewards\/?$/;

/** `Prefer: respond-async` asks for a 202 at once, even for a few rewards. */
export function prefersRespondAsync(prefer: string | undefined): boolean {
  return /(^|[,;\s])respond-async([,;\s]|$)/i.test(prefer ?? '');
}

/** The answer of a send: its status, `Idempotent-Replayed` on a replay, its own headers (Location, Retry-After). */
export function sendAnswerHeaders(outcome: HttpOutcome): Record<string, string> {
  return { ...(outcome.replayed ? { 'Idempotent-Replayed': 'true' } : {}), ...(outcome.headers ?? {}) };
}

/**
 * The send route, served on node:http ahead of Express and Nest. It is the gateway's hot path, and the framework
 * around it cost as much CPU as the send itself (bench: 0.64–0.69 ms of gateway CPU per send through Express and Nest,
 * 0.31–0.36 ms without), so the request takes the same steps by direct calls instead of a middleware chain:
 * X-Request-Id (requestIdOf, as assignRequestId) and the API's security headers (apiSecurityHeaders: what
 * securityHeaders sets, recorded once; all of an answer's headers go in one writeHead), the API key from the headers before a byte
 * of the body is read (ApiKeyGuard.authenticate, with its throttle and Express's client address under
 * `trust proxy: loopback`), the tenant check (ApiKeyGuard.authorize), the body under the send route's limits
 * (readJsonBody, as jsonBody), the compiled body schema (SendBodyPipe), RewardDispatchService.send — the one
 * implementation of sends — and errors in the one JSON shape (toErrorResponse). Each request is logged as pino-http
 * logs the others. `RewardDispatchController.send` declares the route for OpenAPI and answers the same way should a
 * request reach it.
 */
export function serveSendRoute(
  app: NestExpressApplication,
  config: AppConfig,
  security: readonly string[],
): void {
  const server = app.getHttpServer() as Server;
  const listeners = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  if (listeners.length !== 1) throw new Error('expected Express as the only request listener');
  const [express] = listeners;
  const guard = app.get(ApiKeyGuard);
  const dispatches = app.get(RewardDispatchService);
  const body = new SendBodyPipe(config);
  const trust = proxyaddr.compile('loopback'); // as app.set('trust proxy', 'loopback')
  const errorLogger = new NestLogger('Http');

  const handle = async (
    req: IncomingMessage & { ip?: string },
    res: ServerResponse,
    tenant: string,
    id: string,
  ) => {
    // Without X-Forwarded-For the client is the socket's peer, trusted or not (what proxyaddr answers then).
    req.ip = req.headers['x-forwarded-for'] === undefined ? req.socket.remoteAddress : proxyaddr(req, trust);
    const principal = await guard.authenticate(req).catch((error: unknown) => {
      res.setHeader('Connection', 'close'); // the unread body is not worth reading
      throw error;
    });
    await guard.authorize(principal, tenant);
    const raw = await readJsonBody(req, res, SEND_LIMITS);
    const dto = body.transform(raw === NO_BODY ? undefined : raw);
    const outcome = await dispatches.send(
      tenant,
      header(req, 'idempotency-key'),
      dto,
      raw === NO_BODY ? undefined : raw,
      prefersRespondAsync(header(req, 'prefer')),
    );
    writeJson(res, id, outcome.status, outcome.body, sendAnswerHeaders(outcome));
  };

  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const tenant = req.method === 'POST' ? sendTenant(req.url) : null;
    if (tenant === null) return express(req, res);
    const started = Date.now();
    const id = requestIdOf(req);
    (req as { id?: unknown }).id = id;
    res.once('close', () => logCompleted(req, res, started));
    handle(req, res, tenant, id).catch((e: unknown) => {
      (res as { err?: unknown }).err = e;
      if (res.headersSent) return void res.end();
      const { status, body: errorBody, headers } = toErrorResponse(e, req as Request, errorLogger);
      writeJson(res, id, status, errorBody, headers);
    });
  });

  /**
   * As Express's res.json, with every header of the answer in one `writeHead`: X-Request-Id, the security headers
   * and Cache-Control (`securityHeaders`' for the API, recorded once), the answer's own, the content's. A header set
   * earlier (`Connection: close` on a refused body) is kept: Node merges them.
   */
  function writeJson(
    res: ServerResponse,
    id: string,
    status: number,
    body: unknown,
    headers: Record<string, string>,
  ): void {
    const text = JSON.stringify(body);
    const all = [REQUEST_ID_HEADER, id, ...security];
    for (const name in headers) all.push(name, headers[name]);
    all.push(
      'Content-Type',
      'application/json; charset=utf-8',
      'Content-Length',
      String(Buffer.byteLength(text)),
    );
    res.writeHead(status, all);
    res.end(text);
  }
}

/** The decoded tenant of a send request, or null when it is not one (then Express answers it as before). */
function sendTenant(url: string | undefined): string | null {
  const match = SEND_PATH.exec(url ?? '');
  if (!match) return null;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return null; // a malformed escape: Express's own answer
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The line pino-http writes for every other request: same logger, serializers, levels and messages. */
function logCompleted(req: IncomingMessage, res: ServerResponse, started: number): void {
  const logger = PinoLogger.root;
  const err = (res as { err?: unknown }).err;
  const level = res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info';
  if (!logger?.isLevelEnabled(level)) return;
  const responseTime = Date.now() - started;
  if (res.statusCode >= 500) logger[level]({ req, res, err, responseTime }, 'request errored');
  else logger[level]({ req, res, responseTime }, 'request completed');
}
