import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from './clock';

export const REQUEST_ID_HEADER = 'X-Request-Id';
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's `X-Request-Id` when it is a sane token (1–128 of `[A-Za-z0-9._:-]`), else a fresh UUID. */
export function requestIdOf(req: IncomingMessage): string {
  const existing = (req as { id?: unknown }).id;
  if (typeof existing === 'string' && existing) return existing;
  const header = req.headers['x-request-id'];
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
}

/** When the request reached this process (epoch ms, by the app's clock), as the first middleware noted it. */
export function arrivedAtOf(req: IncomingMessage): number | undefined {
  const at = (req as { arrivedAt?: unknown }).arrivedAt;
  return typeof at === 'number' ? at : undefined;
}

/**
 * The first middleware of the app: every answer carries `X-Request-Id` — including those given before any route
 * runs (body-reader 400/413/415, the sandbox, unknown routes); the request context and the log lines reuse `req.id`.
 * It also notes when the request arrived (`arrivedAtOf`): a caller's wait is counted from there, queues inside a busy
 * process included.
 */
export function assignRequestIds(
  clock: Clock,
): (req: IncomingMessage, res: ServerResponse, next: () => void) => void {
  return (req, res, next) => {
    (req as { arrivedAt?: number }).arrivedAt = clock.now();
    const id = requestIdOf(req);
    (req as { id?: unknown }).id = id;
    res.setHeader(REQUEST_ID_HEADER, id);
    next();
  };
}
