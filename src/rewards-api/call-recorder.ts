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

/** One request about to go out for a connection: which attempt of its call, 429s absorbed, pacing wait (ms). */
export interface UpstreamExchange {
  connectionId: string;
  operation: UpstreamOperation;
  attempt: number;
  throttled: number;
  pacingWaitMs: number;
}

/**
 * Where each request for a connection is reported (the connection activity): `exchange` runs `send` and records its
 * answer without changing it. Declared here so this module does not depend on the one that keeps the records.
 */
export abstract class CallRecorder {
  abstract exchange<R>(what: UpstreamExchange, send: () => Promise<R>): Promise<R>;
}

const OPERATIONS: Record<string, UpstreamOperation> = {
  'POST /orders': 'create_order',
  'POST /webhooks': 'register_webhook',
  'GET /orders/:id': 'get_order',
  'GET /rewards/:id': 'get_reward',
  'GET /rewards': 'list_rewards',
  'GET /fields': 'list_fields',
  'GET /organizations': 'probe',
};

/** The operation of an `/api/v2` request, from its method and path (no ids, no query kept). */
export function operationOf(method: string, path: string): UpstreamOperation {
  const [, collection, id] = /^\/([^/?]*)(\/[^?]*)?/.exec(path) ?? [];
  return OPERATIONS[`${method} /${collection}${id ? '/:id' : ''}`] ?? 'other';
}

export function recorded<R>(
  recorder: CallRecorder | null | undefined,
  what: UpstreamExchange,
  send: () => Promise<R>,
): Promise<R> {
  return recorder ? recorder.exchange(what, send) : send();
}
