import { randomUUID } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { Logger as NestLogger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { NextFunction, Request, Response } from 'express';
import { Logger, PARAMS_PROVIDER_TOKEN, type Params } from 'nestjs-pino';
import type { AppConfig } from './config/app-config';
import type { AppModuleOptions } from './app.module';
import { AppModule } from './app.module';
import { nulCharacterError } from './common/app-error';
import { toErrorResponse } from './common/http-exception.filter';
import { formBody } from './common/form-body';
import { jsonBody } from './common/json-body';
import { createValidationPipe } from './common/validation';
import { REQUEST_ID_HEADER, assignRequestIds } from './common/request-id';
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
): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, options), {
    bodyParser: false,
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  app.disable('x-powered-by');
  app.set('etag', false); // answers are Cache-Control: no-store; hashing each body for an ETag buys nothing
  app.set('trust proxy', 'loopback');
  configureHttp(app, config);
  return app;
}

function configureHttp(app: NestExpressApplication, config: AppConfig): void {
  const errorLogger = new NestLogger('Http');
  // First, before anything can answer: X-Request-Id, then the security headers and Cache-Control: no-store.
  const security = securityHeaders(config.publicBaseUrl);
  // With tracing on, the request's server span comes first, so everything after runs inside it.
  if (tracingEnabled()) app.use(traceRequests);
  const clock = app.get(Clock);
  app.use(assignRequestIds(clock));
  app.use(security);
  if (config.mountSandbox) mountSandbox(app, config);
  // JSON bodies only on the gateway's own API; the sandbox (mounted later under /sandbox) parses its own.
  // A body is read only after the key in the headers is known good, and parsed within limits (common/json-body.ts).
  app.use('/v1', app.get(ApiKeyGuard).earlyAuth(), jsonBody);
  // The rewards service's webhooks: no API key; the raw body (≤ 64 KiB) is kept for the signature check.
  app.use('/webhooks/rewards', app.get(DeliveryWebhookIntake).bodyReader());
  app.use('/ops/connections', formBody); // the dashboard's buttons
  // With tracing on, what follows the body readers runs inside the request's span again.
  if (tracingEnabled()) app.use(continueTrace);
  app.use(['/v1', '/ops', '/connect', '/oauth'], rejectNulCharacters);
  // Last before the routes (after the body readers): each request's context (request id, address, caller) and its
  // access line.
  const logAnswer = logAnswers(appLogger(app.get<Params>(PARAMS_PROVIDER_TOKEN)), clock);
  app.use((req: Request, res: Response, next: NextFunction) => {
    logAnswer(req, res);
    openRequestContext(req, res, next);
  });
  app.use((error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    const { status, body, headers } = toErrorResponse(error, req, errorLogger);
    for (const name in headers) res.setHeader(name, headers[name]); // WWW-Authenticate, Retry-After
    res.status(status).json(body);
  });
  app.useGlobalPipes(createValidationPipe());
  answerProtocolErrorsInJson(app);
  setupOpenApi(app, config);
}

/**
 * The built-in rewards-service emulator under /sandbox, with the gateway's callback pre-registered. Its state is kept
 * in Postgres (`sandbox_state`), so a restart keeps every grant: loaded before the sandbox answers its first request
 * (earlier requests wait), saved at most once a second after changes and once more when the app closes.
 */
function mountSandbox(app: NestExpressApplication, config: AppConfig): void {
  const env = config.rewards.sandbox;
  if (!env) return;
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
  app.use('/sandbox', sandbox.app);
  // The last changes are written before Nest closes the database: closeApp() runs this first (main.ts on
  // SIGINT/SIGTERM, the tests). Not a wrapper around app.close: Nest's application proxy ignores assignments.
  beforeClose.set(app, () =>
    sandbox
      .close()
      .catch((error: unknown) => logger.error(`Sandbox state not saved on close: ${String(error)}`)),
  );
}

/**
 * Requests Node's HTTP parser rejects before any route runs (headers over 16 KiB, malformed request lines) get the
 * same JSON error shape instead of an empty response.
 */
function answerProtocolErrorsInJson(app: NestExpressApplication): void {
  const server = app.getHttpServer() as import('node:http').Server;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: import('node:stream').Duplex) => {
    if (!socket.writable) return socket.destroy();
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
  });
}

/** NUL characters cannot be stored in Postgres text and have no business in any input: refuse them by name. */
function rejectNulCharacters(req: Request, _res: Response, next: NextFunction): void {
  // Bodies were checked while parsed (jsonBody, formBody); left are the query string and the path.
  const found =
    (req.url.includes('?') ? findNul(req.query, 'query') : undefined) ??
    (req.path.includes('\u0000') ? 'path' : undefined);
  if (found) {
    next(nulCharacterError(found));
    return;
  }
  next();
}

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
