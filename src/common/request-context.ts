import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingMessage } from 'node:http';
import type { AuditActor } from '../audit/audit-actions';
import { requestIdOf } from './request-id';

/** The dispatch (and reward) an upstream request is made for (connection activity). */
export interface Served {
  readonly dispatchId: string;
  /** The reward's position in the dispatch; null when one order carries several (the `array` shape). */
  readonly rewardPosition: number | null;
}

/**
 * Everything scoped to the request being served — or to a CLI command, or to a background pass's upstream call — in
 * one AsyncLocalStorage, so that services need not thread it through: the log lines' request id (logging.ts), the
 * audit trail's request id, address and caller, and the dispatch an upstream call serves. One store rather than one
 * per concern: every asynchronous step of a request copies each store along, so each one more costs every send.
 */
export interface RequestContext {
  /** The request id of the answer's `X-Request-Id` (and of its log lines); null outside a request. */
  readonly requestId: string | null;
  readonly clientAddress: string | null;
  /**
   * Who is calling: set by the API key guard once it has authenticated the caller; null on public routes (the connect
   * callback names its actor itself).
   */
  actor: AuditActor | null;
  /** Set by `serving()` around an upstream call made for a dispatch. */
  readonly served?: Served;
}

const storage = new AsyncLocalStorage<RequestContext>();
const OUTSIDE: RequestContext = Object.freeze({ requestId: null, clientAddress: null, actor: null });

/** Runs `work` (and everything it starts) in `context`: the CLI for its commands. */
export function runInRequestContext<T>(context: RequestContext, work: () => T): T {
  return storage.run(context, work);
}

/**
 * Opens each request's context, after the body readers (whose callbacks may run outside it) and right before the
 * route (app.factory.ts): the guard fills in the caller, services read it when they record a change or write a log
 * line. `req.ip` honours the app's `trustProxy` setting.
 */
export function openRequestContext(
  req: Pick<IncomingMessage, 'headers' | 'socket'> & { ip?: string },
  next: () => void,
): void {
  storage.run(
    { requestId: requestIdOf(req), clientAddress: req.ip ?? req.socket.remoteAddress ?? null, actor: null },
    next,
  );
}

/** The context of the request being served, if any. */
export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

/**
 * Runs `work` — an upstream call made for a dispatch — so that the activity records of every request it makes say
 * which dispatch and reward they served: its attempts, its retries after a 429 or a 401, and the token refresh a 401
 * starts inside the vault. A context rather than an argument because that refresh is reached through the vault and
 * shared by the calls waiting on it (it is recorded once, for the call that started it).
 */
export function serving<T>(served: Served, work: () => Promise<T>): Promise<T> {
  return storage.run({ ...(storage.getStore() ?? OUTSIDE), served }, work);
}

/** What the current upstream call serves, if anything. */
export function currentlyServed(): Served | undefined {
  return storage.getStore()?.served;
}
