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
import { AppError } from './common/app-error';
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
  app.use((error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    const { status, body } = toErrorResponse(error, req, errorLogger);
    res.status(status).json(body);
  });
  app.useGlobalPipes(createValidationPipe());
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
  });
  app.use('/sandbox', sandbox.app);
}

/** A body sent with anything but JSON is refused with 415, instead of being silently ignored. */
function requireJsonContentType(req: Request, _res: Response, next: NextFunction): void {
  const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
  if (hasBody && !req.is('application/json')) {
    next(
      new AppError(415, 'unsupported_media_type', 'Send the request body as JSON with "Content-Type: application/json".', [
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
