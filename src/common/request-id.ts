import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const REQUEST_ID_HEADER = 'X-Request-Id';
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's `X-Request-Id` when it is a sane token (1–128 of `[A-Za-z0-9._:-]`), else a fresh UUID. */
export function requestIdOf(req: IncomingMessage): string {
  const existing = (req as { id?: unknown }).id;
  if (typeof existing === 'string' && existing) return existing;
  const header = req.headers['x-request-id'];
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
}

/**
 * The first middleware of the app: every answer carries `X-Request-Id` — including those given before any route or
 * the logger runs (body-parser 400/413/415, the sandbox, unknown routes). The logger (pino-http) reuses `req.id`.
 */
export function assignRequestId(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  const id = requestIdOf(req);
  (req as { id?: unknown }).id = id;
  res.setHeader(REQUEST_ID_HEADER, id);
  next();
}
