import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Params } from 'nestjs-pino';
import type { DestinationStream, LogFn, Logger } from 'pino';
import type { LogLevel } from '../config/app-config';
import { REQUEST_ID_HEADER, requestIdOf } from './request-id';
import { traceLogFields, tracingEnabled } from './tracing';

const SENSITIVE_QUERY =
  /([?&](?:code|state|token|access_token|refresh_token|client_secret|code_verifier|key)=)[^&#]*/gi;

/** Masks secrets that can travel in a URL: OAuth codes and states, connect-link tokens. */
export function redactUrl(url: string): string {
  return url.replace(SENSITIVE_QUERY, '$1[REDACTED]').replace(/\/connect\/[^/?#]+/, '/connect/[REDACTED]');
}

/** Paths that must never appear in logs as values; pino replaces them with "[REDACTED]". */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  '*.access_token',
  '*.refresh_token',
  '*.client_secret',
  '*.password',
  '*.token',
  '*.key',
];

/**
 * Nest's own start-up lines ("Mapped {/v1/tenants, POST} route", "… dependencies initialized", ~80 of them) say
 * nothing an operator acts on: logged at debug instead of info, so a start at the default level is quiet up to the
 * banner, and LOG_LEVEL=debug still shows them.
 */
const FRAMEWORK_START_UP = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
]);
const INFO = 30;

function quietStartUp(this: Logger, args: Parameters<LogFn>, method: LogFn, level: number): void {
  const context = (args[0] as { context?: unknown } | null | undefined)?.context;
  if (level === INFO && typeof context === 'string' && FRAMEWORK_START_UP.has(context)) {
    this.debug(...args);
    return;
  }
  method.apply(this, args);
}

export function loggerParams(level: LogLevel, destination?: DestinationStream): Params {
  const options = {
    level,
    hooks: { logMethod: quietStartUp },
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    // With tracing on, each line written inside a span carries trace_id and span_id; off, no mixin runs at all.
    ...(tracingEnabled() ? { mixin: traceLogFields } : {}),
    // Normally `assignRequestId` (the app's first middleware) has set req.id and the header already.
    genReqId: (req: IncomingMessage, res: ServerResponse) => {
      const id = requestIdOf(req);
      res.setHeader(REQUEST_ID_HEADER, id);
      return id;
    },
    // Our serializers read the raw request and response: pino-std-serializers' wrapped copies (every header, query,
    // params, addresses) would be built per request only to be thrown away.
    wrapSerializers: false,
    serializers: {
      req: (req: { id: unknown; method: string; url: string; headers: Record<string, unknown> }) => ({
        id: req.id,
        method: req.method,
        url: redactUrl(req.url),
        headers: {
          'user-agent': req.headers['user-agent'],
          authorization: req.headers.authorization,
          cookie: req.headers.cookie,
        },
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
      err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info',
    autoLogging: { ignore: (req: IncomingMessage) => req.url === '/health/live' },
  };
  return { pinoHttp: destination ? [options, destination] : options };
}
