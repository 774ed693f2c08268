import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Params } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import type { LogLevel } from '../config/app-config';

const SENSITIVE_QUERY = /([?&](?:code|state|token|access_token|refresh_token|client_secret|code_verifier|key)=)[^&#]*/gi;

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

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function loggerParams(level: LogLevel, destination?: DestinationStream): Params {
  const options = {
        level,
        redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
        genReqId: (req: IncomingMessage, res: ServerResponse) => {
          const header = req.headers['x-request-id'];
          const id = typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
          res.setHeader('X-Request-Id', id);
          return id;
        },
        serializers: {
          req: (req: { id: unknown; method: string; url: string; headers: Record<string, unknown> }) => ({
            id: req.id,
            method: req.method,
            url: redactUrl(req.url),
            headers: { 'user-agent': req.headers['user-agent'], authorization: req.headers.authorization, cookie: req.headers.cookie },
          }),
          res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
        },
        customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
          err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info',
        autoLogging: { ignore: (req: IncomingMessage) => req.url === '/health/live' },
  };
  return { pinoHttp: destination ? [options, destination] : options };
}
