import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { INestApplication } from '@nestjs/common';
import { Logger as NestLogger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import express from 'express';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Logger, PARAMS_PROVIDER_TOKEN, type Params } from 'nestjs-pino';
import type { AppConfig } from './config/app-config';
import type { AppModuleOptions } from './app.module';
import { AppModule } from './app.module';
import { nulCharacterError, undecodableUrlError } from './common/app-error';
import { toErrorResponse } from './common/http-exception.filter';
import { readFormBody } from './common/form-body';
import { NO_BODY, readJsonBody } from './common/json-body';
import { createValidationPipe } from './common/validation';
import { REQUEST_ID_HEADER, requestIdOf } from './common/request-id';
import { securityHeaders } from './common/security-headers';
import { continueTrace, traceRequests, tracingEnabled } from './common/tracing';
import { openRequestContext } from './common/request-context';
import { appLogger, logAnswers } from './common/logging';
import { Clock } from './common/clock';
import { ApiKeyGuard } from './tenants/auth/api-key.guard';
import { DeliveryWebhookIntake } from './delivery-webhooks/delivery-webhook.intake';
import { createSandbox } from './sandbox/sandbox.app';
import { SandboxStore } from './sandbox/sandbox.store';

/** Work to finish before an app closes (the mounted sandbox's last write), per app. */
const beforeClose = new WeakMap<object, () => Promise<void>>();

/** Closes an app made by createApp: what must happen first (the sandbox's last write), then Nest's own close. */
export async function closeApp(app: INestApplication): Promise<void> {
  await beforeClose.get(app)?.();
  await app.close();
}

/**
 * Builds the gateway's HTTP application (not yet listening). main.ts and the e2e tests share it, so tests drive
 * exactly the app that runs in production.
 */
export async function createApp(
  config: AppConfig,
  options: AppModuleOptions = {},
): Promise<NestFastifyApplication> {
  // A URL the router cannot decode (a malformed percent-encoding) is answered before any hook: with the headers and
  // the access line of every answer all the same, in the one error shape.
  const first: { begin?: Begin } = {};
  const frameworkLogger = new NestLogger('Http');
  const adapter = new GatewayAdapter({
    frameworkErrors: (_error: Error, request: FastifyRequest, reply: FastifyReply) => {
      first.begin?.(request.raw, reply.raw, request.id);
      const { status, body } = toErrorResponse(undecodableUrlError(), request, frameworkLogger);
      void reply.code(status).send(body);
    },
    // Routes as Express routed them: any letter case, an optional trailing slash, parameters of any length.
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: 16 * 1024 },
    trustProxy: 'loopback',
    // The caller's X-Request-Id when sane, else a UUID (request-id.ts); kept on the Node request too.
    genReqId: (req: IncomingMessage) => ((req as { id?: string }).id = requestIdOf(req)),
    clientErrorHandler: answerProtocolErrorInJson,
    // Node's own timeouts, as before (Fastify's defaults: no request timeout, 72-s keep-alive, 503s while closing).
    requestTimeout: 300_000,
    keepAliveTimeout: 5_000,
    return503OnClosing: false,
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, options), adapter, {
    bodyParser: false,
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  first.begin = configureHttp(app, config);
  return app;
}

const STATIC_TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  png: 'image/png',
  map: 'application/json; charset=utf-8',
};

/** Fastify's adapter, serving Swagger UI's files itself (a handful, for /docs: no static-files plugin needed). */
class GatewayAdapter extends FastifyAdapter {
  /** SwaggerModule's call: the files of Swagger UI's directory under `/docs/`, each read once, by name only. */
  override useStaticAssets(options: { root: string; prefix: string }): this {
    const files = new Map<string, Buffer | null>();
    this.getInstance().get(`${options.prefix}/:file`, (request, reply: FastifyReply) => {
      const name = (request.params as { file: string }).file;
      const type = STATIC_TYPES[/^[\w.-]+\.(\w+)$/.exec(name)?.[1] ?? ''];
      if (type && !files.has(name)) files.set(name, readIfThere(`${options.root}/${name}`));
      const file = type && files.get(name);
      if (!file) return reply.callNotFound();
      return reply.header('Cache-Control', 'public, max-age=0').type(type).send(file);
    });
    return this;
  }
}

function readIfThere(file: string): Buffer | null {
  try {
    return readFileSync(file);
  } catch {
    return null;
  }
}

/** Whether `path` is `prefix` or below it, in any letter case (as Express's `app.use(prefix)` matched). */
const under = (path: string, prefix: string) =>
  path.length >= prefix.length &&
  path.slice(0, prefix.length).toLowerCase() === prefix &&
  (path.length === prefix.length || path[prefix.length] === '/');
const pathOf = (url: string) => {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
};
/** What every answer gets before anything else runs: X-Request-Id, the arrival time, the security headers. */
type Begin = (req: IncomingMessage, res: ServerResponse, id: string) => void;
const BODY = Symbol('body');
type WithBody = FastifyRequest & { [BODY]?: unknown };

/**
 * One request pipeline for every route, as Fastify hooks: request id and arrival, security headers, the mounted
 * sandbox, the access line and the server span (onRequest); the body readers, each within its limits (preParsing);
 * then NUL checks and the request's context, right before the route (preValidation).
 */
function configureHttp(app: NestFastifyApplication, config: AppConfig): Begin {
  const fastify = app.getHttpAdapter().getInstance();
  const clock = app.get(Clock);
  const security = securityHeaders(config.publicBaseUrl);
  const sandbox = config.mountSandbox ? mountSandbox(app, config) : undefined;
  const logAnswer = logAnswers(appLogger(app.get<Params>(PARAMS_PROVIDER_TOKEN)), clock);
  const tracing = tracingEnabled();
  const guard = app.get(ApiKeyGuard);
  const webhookBody = app.get(DeliveryWebhookIntake).bodyReader();

  // First, before anything can answer: X-Request-Id, then the security headers and Cache-Control: no-store.
  const begin: Begin = (req, res, id) => {
    (req as { arrivedAt?: number }).arrivedAt = clock.now();
    res.setHeader(REQUEST_ID_HEADER, id);
    security(req, res);
  };
  fastify.addHook('onRequest', (request, reply, done) => {
    const req = request.raw;
    const res = reply.raw;
    begin(req, res, request.id);
    // The built-in sandbox (an Express app of its own) answers its paths itself, its body unread by the gateway.
    if (sandbox && under(pathOf(req.url ?? '/'), '/sandbox')) {
      reply.hijack();
      sandbox(req, res);
      return;
    }
    logAnswer(req, res);
    // With tracing on, the request's server span: everything after runs inside it.
    if (tracing) traceRequests(req, res, done, () => request.routeOptions.url);
    else done();
  });
  // The body readers, each on its paths only: the gateway's API (JSON, read only after the key in the headers is
  // known good, within limits: common/json-body.ts), the rewards service's webhooks (the raw body, ≤ 64 KiB, kept for
  // the signature check; no API key), the dashboard's buttons (forms).
  fastify.addHook('preParsing', async (request: WithBody, reply, payload) => {
    const path = pathOf(request.url);
    const [req, res] = [request.raw, reply.raw];
    if (under(path, '/v1')) {
      await guard.earlyAuth(request, res);
      const body = await readJsonBody(req, res);
      if (body !== NO_BODY) request[BODY] = body;
    } else if (under(path, '/webhooks/rewards')) request[BODY] = await webhookBody(req, res);
    else if (under(path, '/ops/connections')) request[BODY] = await readFormBody(req, res);
    return payload;
  });
  // What the readers above read is the body; nothing else is parsed (Fastify's own parsers are off).
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', (request: WithBody, _payload, done) => done(null, request[BODY]));
  // Last before the route: NUL characters in the query string or the path, then the request's context (request id,
  // address, caller) — after the body readers, whose callbacks run outside it (and outside the server span).
  const checked = ['/v1', '/ops', '/connect', '/oauth'];
  fastify.addHook('preValidation', (request, _reply, done) => {
    const path = pathOf(request.url);
    if (checked.some((prefix) => under(path, prefix))) {
      const found =
        (request.url.includes('?') ? findNul(request.query, 'query') : undefined) ??
        (path.includes('\u0000') ? 'path' : undefined);
      if (found) return done(nulCharacterError(found));
    }
    const open = () => openRequestContext(request, done);
    if (tracing) continueTrace(request.raw, open);
    else open();
  });
  app.useGlobalPipes(createValidationPipe());
  setupOpenApi(app, config);
  return (req, res, id) => {
    begin(req, res, id);
    logAnswer(req, res);
  };
}

/**
 * The built-in rewards-service emulator under /sandbox, with the gateway's callback pre-registered. Its state is kept
 * in Postgres (`sandbox_state`), so a restart keeps every grant: loaded before the sandbox answers its first request
 * (earlier requests wait), saved at most once a second after changes and once more when the app closes.
 */
function mountSandbox(
  app: NestFastifyApplication,
  config: AppConfig,
): ((req: IncomingMessage, res: ServerResponse) => void) | undefined {
  const env = config.rewards.sandbox;
  if (!env) return undefined;
  const logger = new NestLogger('Sandbox');
  const sandbox = createSandbox({
    clients: [
      {
        clientId: env.clientId,
        clientSecret: env.clientSecret,
        redirectUris: [`${config.publicBaseUrl}/oauth/callback`],
        name: 'Rewards Gateway',
      },
    ],
    control: config.sandboxControl,
    settings: { rateLimitRps: config.sandboxRateLimitRps, orderShape: env.orderShape },
    persistence: SandboxStore.forApp(app),
    logger: { log: (m) => logger.log(m), error: (m) => logger.error(m) },
  });
  // Mounted as before, under /sandbox of an Express app with the gateway's former settings (its paths, `req.baseUrl`).
  const mount = express();
  mount.disable('x-powered-by');
  mount.set('etag', false);
  mount.set('trust proxy', 'loopback');
  mount.use('/sandbox', sandbox.app);
  // The last changes are written before Nest closes the database: closeApp() runs this first (main.ts on
  // SIGINT/SIGTERM, the tests). Not a wrapper around app.close: Nest's application proxy ignores assignments.
  beforeClose.set(app, () =>
    sandbox
      .close()
      .catch((error: unknown) => logger.error(`Sandbox state not saved on close: ${String(error)}`)),
  );
  return mount;
}

/**
 * Requests Node's HTTP parser rejects before any route runs (headers over 16 KiB, malformed request lines) get the
 * same JSON error shape instead of an empty response.
 */
function answerProtocolErrorInJson(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable) return void socket.destroy();
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const status = tooLarge ? 431 : 400;
  const body = JSON.stringify({
    error: {
      code: tooLarge ? 'headers_too_large' : 'bad_request',
      message: tooLarge
        ? 'The request headers are larger than 16 KiB.'
        : 'The request could not be parsed as HTTP.',
      details: [],
    },
  });
  socket.end(
    `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\nContent-Type: application/json\r\n` +
      `${REQUEST_ID_HEADER}: ${randomUUID()}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** NUL characters cannot be stored in Postgres text and have no business in any input: refuse them by name. */
function findNul(value: unknown, at: string, depth = 0): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? at : undefined;
  if (!value || typeof value !== 'object' || depth > 50) return undefined;
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (key.includes('\u0000')) return `${at}.${key.split('\u0000').join('\\u0000')}`;
    const inner = findNul(v, Array.isArray(value) ? `${at}[${key}]` : `${at}.${key}`, depth + 1);
    if (inner) return inner;
  }
  return undefined;
}

function setupOpenApi(app: INestApplication, config: AppConfig): void {
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Rewards Gateway')
      .setDescription(
        'Send rewards through the rewards service on behalf of tenants. Authenticate with ' +
          '`Authorization: Bearer <API key>`; errors are `{"error": {"code", "message", "details"}}`.',
      )
      .setVersion('1')
      .addServer(config.publicBaseUrl)
      .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'A tenant or operator API key.' })
      .build(),
  );
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'docs/openapi.json' });
}
