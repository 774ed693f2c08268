import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const REQUEST_ID_HEADER = 'X-Request-Id';
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's `X-Request-Id` when it is a sane token (1–128 of `[A-Za-z0-9._:-]`), else a fresh UUID. */
export function requestIdOf(req: Pick<IncomingMessage, 'headers'>): string {
  const existing = (req as { id?: unknown }).id;
  if (typeof existing === 'string' && existing) return existing;
  const header = req.headers['x-request-id'];
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
}

/**
 * When the request reached this process (epoch ms, by the app's clock), as the app's first hook noted it: a caller's
 * wait is counted from there, queues inside a busy process included.
 */
export function arrivedAtOf(req: IncomingMessage): number | undefined {
  const at = (req as { arrivedAt?: unknown }).arrivedAt;
  return typeof at === 'number' ? at : undefined;
}
