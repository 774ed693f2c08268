import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Params } from 'nestjs-pino';
import { pino, type DestinationStream, type LogFn, type Logger, type LoggerOptions } from 'pino';
import type { LogLevel } from '../config/app-config';
import type { Clock } from './clock';
import { arrivedAtOf } from './request-id';
import { currentRequestContext } from './request-context';
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

/**
 * The app's logger: JSON lines (pino), secrets redacted, Nest's start-up chatter at debug. Every line written while a
 * request is served carries its id (`req.id`, from the one request context, request-context.ts) — the service's lines
 * as well as the access line — with trace and span ids when tracing is on. nestjs-pino routes Nest's `Logger` here;
 * its per-request middleware (a pino-http child logger and a context of its own for each request) is not used: the
 * request context already knows the id, and the access line is written by `logAnswers`.
 */
export function loggerParams(level: LogLevel, destination?: DestinationStream): Params {
  const options: LoggerOptions = {
    level,
    hooks: { logMethod: quietStartUp },
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    mixin: tracingEnabled() ? () => ({ ...requestLogFields(), ...traceLogFields() }) : requestLogFields,
    serializers: {
      // The access line's request; a service's line carries only `{ id }` (requestLogFields).
      req: (req: (IncomingMessage & { id?: unknown }) | { id: string; headers?: undefined }) =>
        req.headers === undefined
          ? req
          : {
              id: req.id,
              method: req.method,
              url: redactUrl(req.url ?? ''),
              headers: {
                'user-agent': req.headers['user-agent'],
                authorization: req.headers.authorization,
                cookie: req.headers.cookie,
              },
            },
      res: (res: ServerResponse) => ({ statusCode: res.statusCode }),
    },
  };
  const logger = destination ? pino(options, destination) : pino(options);
  return { pinoHttp: { logger }, forRoutes: [] };
}

/** The logger `loggerParams` made, from nestjs-pino's params as the app holds them. */
export function appLogger(params: Params): Logger {
  return (params.pinoHttp as { logger: Logger }).logger;
}

/** The request id of the line being written, from the request context (a fresh object: pino merges into it). */
function requestLogFields(): Record<string, unknown> {
  const id = currentRequestContext()?.requestId;
  return id ? { req: { id } } : {};
}

/**
 * The access log: one line per answer (but `/health/live`'s), once it is sent or the connection closes — `info`,
 * `warn` for a 4xx, `error` for a 5xx — with the request (its Authorization header redacted), the status and the time
 * taken from the request's arrival.
 */
export function logAnswers(
  logger: Logger,
  clock: Clock,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (req.url === '/health/live') return;
    const done = (): void => {
      res.off('finish', done);
      res.off('close', done);
      const status = res.statusCode;
      const now = clock.now();
      const line = { req, res, responseTime: now - (arrivedAtOf(req) ?? now) };
      if (status >= 500)
        logger.error({ ...line, err: new Error(`failed with status code ${status}`) }, 'request errored');
      else if (status >= 400) logger.warn(line, 'request completed');
      else logger.info(line, 'request completed');
    };
    res.on('finish', done);
    res.on('close', done);
  };
}
