/** What an upstream request did, named for people: the activity's `operation`. */
export const UPSTREAM_OPERATIONS = [
  'create_order',
  'get_order',
  'get_reward',
  'list_rewards',
  'list_fields',
  'probe',
  'register_webhook',
  'token_refresh',
  'other',
] as const;
export type UpstreamOperation = (typeof UPSTREAM_OPERATIONS)[number];

/** One request about to go out for a connection, as the caller knows it. */
export interface UpstreamExchange {
  connectionId: string;
  operation: UpstreamOperation;
  /** Which request of this call (1 = the first; the retries after a 429 or a 401 count on). */
  attempt: number;
  /** 429s absorbed earlier in this call (each slowed the account down and was retried). */
  throttled: number;
  /** How long the request waited for its account's pacing slot (ms). */
  pacingWaitMs: number;
}

/**
 * Where the rewards client reports each request it makes for a connection (the connection activity): `exchange` runs
 * `send` and records its answer — status, latency, outcome — without changing it (a failure is rethrown as it is).
 * Declared here, where it is called, so this module does not depend on the module that keeps the records.
 */
export abstract class CallRecorder {
  abstract exchange<R>(what: UpstreamExchange, send: () => Promise<R>): Promise<R>;
}

/** The operation of an `/api/v2` request, from its method and path (no ids, no query kept). */
export function operationOf(method: string, path: string): UpstreamOperation {
  const bare = path.split('?')[0];
  if (method === 'POST') {
    if (bare === '/orders') return 'create_order';
    if (bare === '/webhooks') return 'register_webhook';
    return 'other';
  }
  if (bare.startsWith('/orders/')) return 'get_order';
  if (bare.startsWith('/rewards/')) return 'get_reward';
  if (bare === '/rewards') return 'list_rewards';
  if (bare === '/fields') return 'list_fields';
  if (bare === '/organizations') return 'probe';
  return 'other';
}

/** `send()`, reported to `recorder` when there is one. */
export function recorded<R>(
  recorder: CallRecorder | null | undefined,
  what: UpstreamExchange,
  send: () => Promise<R>,
): Promise<R> {
  return recorder ? recorder.exchange(what, send) : send();
}
