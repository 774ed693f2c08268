import { AsyncLocalStorage } from 'node:async_hooks';
import type { AuditActor } from './audit-actions';

/** What the audit trail needs to know of the request a change is made in, without threading `req` through services. */
export interface RequestContext {
  /** The request id of the answer's `X-Request-Id` (and of its log lines). */
  readonly requestId: string | null;
  readonly clientAddress: string | null;
  /** Who is calling; null on public routes (the connect callback names its actor itself). */
  readonly actor: AuditActor | null;
}

const storage = new AsyncLocalStorage<RequestContext>();

/**
 * Runs `work` (and everything it starts) in `context`. Set once per request by the pipeline (RequestContextInterceptor,
 * once the guard knows the caller), and by the CLI for its commands.
 */
export function runInRequestContext<T>(context: RequestContext, work: () => T): T {
  return storage.run(context, work);
}

/** The context of the request being served, if any. */
export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}
