import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { requestIdOf } from '../common/request-id';
import type { AuditActor } from './audit-actions';

/** What the audit trail needs to know of the request a change is made in, without threading `req` through services. */
export interface RequestContext {
  /** The request id of the answer's `X-Request-Id` (and of its log lines). */
  readonly requestId: string | null;
  readonly clientAddress: string | null;
  /**
   * Who is calling: set by the API key guard once it has authenticated the caller; null on public routes (the connect
   * callback names its actor itself).
   */
  actor: AuditActor | null;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `work` (and everything it starts) in `context`: the CLI for its commands. */
export function runInRequestContext<T>(context: RequestContext, work: () => T): T {
  return storage.run(context, work);
}

/**
 * The app's middleware that opens each request's context, placed after the body readers (whose callbacks may run
 * outside it) and right before the routes: the guard fills in the caller, services read it when they record a change.
 * `req.ip` honours the app's `trust proxy` setting.
 */
export function openRequestContext(
  req: IncomingMessage & { ip?: string },
  _res: ServerResponse,
  next: () => void,
): void {
  storage.run(
    {
      requestId: requestIdOf(req),
      clientAddress: req.ip ?? req.socket.remoteAddress ?? null,
      actor: null,
    },
    next,
  );
}

/** The context of the request being served, if any. */
export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}
