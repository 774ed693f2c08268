import type { INestApplication } from '@nestjs/common';
import { Logger as NestLogger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { Logger } from 'nestjs-pino';
import type { AppConfig } from './config/app-config';
import type { AppModuleOptions } from './app.module';
import { AppModule } from './app.module';
import { CommonError } from './common/app-error';
import { toErrorResponse } from './common/http-exception.filter';
import { createValidationPipe } from './common/validation';
import { createSandbox } from './sandbox/sandbox.app';

export const BODY_LIMIT = '1mb';

/**
 * Builds the gateway's HTTP application (not yet listening). main.ts and the e2e tests share it, so tests drive
 * exactly the app that runs in production.
 */
export async function createApp(config: AppConfig, options: AppModuleOptions = {}): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, options), {
    bodyParser: false,
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  configureHttp(app, config);
  return app;
}

function configureHttp(app: NestExpressApplication, config: AppConfig): void {
  const errorLogger = new NestLogger('Http');
  if (config.mountSandbox) mountSandbox(app, config);
  // JSON bodies only on the gateway's own API; the sandbox (mounted later under /sandbox) parses its own.
  app.use('/v1', requireJsonContentType);
  app.use('/v1', express.json({ limit: BODY_LIMIT, strict: true }));
  app.use('/ops/connections', express.urlencoded({ extended: false, limit: '8kb' })); // the dashboard's buttons
  app.use(['/v1', '/ops', '/connect', '/oauth'], rejectNulCharacters);
  app.use((error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    const { status, body } = toErrorResponse(error, req, errorLogger);
    res.status(status).json(body);
  });
  app.useGlobalPipes(createValidationPipe());
  answerProtocolErrorsInJson(app);
  setupOpenApi(app, config);
}

/** The built-in rewards-service emulator under /sandbox, with the gateway's callback pre-registered. */
function mountSandbox(app: NestExpressApplication, config: AppConfig): void {
  const env = config.rewards.sandbox;
  if (!env) return;
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
  });
  app.use('/sandbox', sandbox.app);
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
        message: tooLarge ? 'The request headers are larger than 16 KiB.' : 'The request could not be parsed as HTTP.',
        details: [],
      },
    });
    socket.end(
      `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

/** NUL characters cannot be stored in Postgres text and have no business in any input: refuse them by name. */
function rejectNulCharacters(req: Request, _res: Response, next: NextFunction): void {
  const found = findNul(req.body, 'body') ?? findNul(req.query, 'query') ?? (req.path.includes('\u0000') ? 'path' : undefined);
  if (found) {
    next(new CommonError(400, 'invalid_characters', 'The request contains a NUL character.', [{ field: found, reason: 'contains a NUL (\\u0000) character' }]));
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

/** A body sent with anything but JSON is refused with 415, instead of being silently ignored. */
function requireJsonContentType(req: Request, _res: Response, next: NextFunction): void {
  const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
  if (hasBody && !req.is('application/json')) {
    next(
      new CommonError(415, 'unsupported_media_type', 'Send the request body as JSON with "Content-Type: application/json".', [
        { field: 'Content-Type', reason: `${req.headers['content-type'] ?? 'missing'} is not application/json` },
      ]),
    );
    return;
  }
  next();
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
