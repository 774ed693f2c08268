import type { ConnectionRow } from '../connections/connection-state.store';
import type { DispatchRow, RewardRow, RewardStatus, SettledStatus } from '../reward-dispatch/dispatch.view';

/**
 * The events a tenant can subscribe an endpoint to: the public contract, in one place. Each event has one builder
 * below (its payload type is the builder's) and one line in WEBHOOK_EVENTS, which is the event table of docs/api.md
 * (webhook-events.spec.ts keeps the two equal and pins every payload). The code that makes a change writes its events
 * to the outbox in the same transaction (`enqueueEvents` / `outboxInsert`). Never a secret, a token or a redemption
 * link in `data`.
 */

/** When each event happens, as docs/api.md's event table says it (in the order the API lists an endpoint's events). */
export const WEBHOOK_EVENTS: Readonly<Record<WebhookEventType, string>> = {
  'dispatch.completed':
    'once per dispatch, when it settles: `sent`, `partially_failed`, `failed`, `cancelled` or `pending_approval`',
  'reward.sent': 'a reward becomes `sent` (also after an approval)',
  'reward.delivered':
    'the reward’s delivery reaches `delivered` (a later change to `delivery_failed` is another event)',
  'reward.delivery_failed':
    'the reward’s delivery reaches `delivery_failed` (a later change to `delivered` is another event)',
  'connection.needs_reauth': 'the tenant’s connection needs a new consent',
  'connection.recovered': 'the tenant’s broken connection is active again, or replaced by a new consent',
};
export const WEBHOOK_EVENT_TYPES = Object.keys(WEBHOOK_EVENTS) as readonly WebhookEventType[];

/** One event's body as delivered and signed: `{type, timestamp, data}` (Standard Webhooks style). */
export type TenantEvent = ReturnType<
  | typeof dispatchCompleted
  | typeof rewardSent
  | typeof rewardDelivered
  | typeof rewardDeliveryFailed
  | typeof connectionNeedsReauth
  | typeof connectionRecovered
>;
export type WebhookEventType = TenantEvent['type'];
export type TenantEventOf<T extends WebhookEventType> = Extract<TenantEvent, { type: T }>;

/** A dispatch and a reward as their store holds them (a DispatchRow, a RewardRow), as of the change. */
export type DispatchFacts = Pick<DispatchRow, 'id' | 'tenant_id' | 'environment' | 'idempotency_key'>;
export type RewardFacts = Pick<
  RewardRow,
  'position' | 'external_id' | 'upstream_reward_id' | 'upstream_order_id' | 'delivery_method'
>;

/** The delivery outcome the store recorded for a reward (`status`: the reward's, `sent` or `pending_approval`). */
export type DeliveryFacts = RewardFacts &
  Pick<RewardRow, 'status' | 'delivery_status'> & {
    delivery_reason: string | null;
    delivery_event_at: Date | null;
  };

/** A connection as its store holds it, as of the change. */
export type ConnectionFacts = Pick<ConnectionRow, 'id' | 'tenant_id' | 'environment'>;

const iso = (at: Date) => at.toISOString();
const event = <T extends string, D>(type: T, at: Date, data: D) => ({ type, timestamp: iso(at), data });

const aboutDispatch = (dispatch: DispatchFacts) => ({
  tenant_id: dispatch.tenant_id,
  dispatch_id: dispatch.id,
  environment: dispatch.environment,
  idempotency_key: dispatch.idempotency_key,
});

/** The fields every reward event opens with (`reward_id`: the rewards service's id of the reward). */
const aboutReward = <S extends RewardStatus>(dispatch: DispatchFacts, reward: RewardFacts, status: S) => ({
  ...aboutDispatch(dispatch),
  position: reward.position,
  external_id: reward.external_id,
  status,
  reward_id: reward.upstream_reward_id,
  upstream_order_id: reward.upstream_order_id,
});

const aboutConnection = (connection: ConnectionFacts) => ({
  tenant_id: connection.tenant_id,
  connection_id: connection.id,
  environment: connection.environment,
});

/** `reward.sent`: the reward became `sent` at `at` (`sent_at`: when it was sent, `at` when unknown). */
export function rewardSent(
  dispatch: DispatchFacts,
  reward: RewardFacts & { upstream_order_status: string | null; sent_at: Date | null },
  at: Date,
) {
  return event('reward.sent', at, {
    ...aboutReward(dispatch, reward, 'sent'),
    upstream_order_status: reward.upstream_order_status,
    delivery_method: reward.delivery_method,
    sent_at: iso(reward.sent_at ?? at),
  });
}

/** `delivery_status`: the rewards service's word for it; `delivery_reason`: why it failed, when it did. */
const delivery = <S extends 'delivered' | 'delivery_failed'>(
  state: S,
  dispatch: DispatchFacts,
  reward: DeliveryFacts,
) => ({
  ...aboutReward(dispatch, reward, reward.status),
  delivery_method: reward.delivery_method,
  delivery_state: state,
  delivery_status: reward.delivery_status,
  delivery_reason: reward.delivery_reason,
  delivery_event_at: reward.delivery_event_at ? iso(reward.delivery_event_at) : null,
});

/** `reward.delivered`: the reward's delivery became `delivered`. */
export const rewardDelivered = (dispatch: DispatchFacts, reward: DeliveryFacts, at: Date) =>
  event('reward.delivered', at, delivery('delivered', dispatch, reward));

/** `reward.delivery_failed`: the reward's delivery became `delivery_failed`. */
export const rewardDeliveryFailed = (dispatch: DispatchFacts, reward: DeliveryFacts, at: Date) =>
  event('reward.delivery_failed', at, delivery('delivery_failed', dispatch, reward));

/**
 * `dispatch.completed`: the dispatch left `sending` / `queued` for a settled status. `counts`: its rewards per status
 * after the change; `error_code`: the dispatch's error code, when none of its rewards went out.
 */
export function dispatchCompleted(
  dispatch: DispatchFacts & { external_reference: string | null; created_at: Date },
  outcome: { status: SettledStatus; counts: Record<RewardStatus, number>; error_code: string | null },
  at: Date,
) {
  return event('dispatch.completed', at, {
    ...aboutDispatch(dispatch),
    external_reference: dispatch.external_reference,
    status: outcome.status,
    counts: { ...outcome.counts },
    error_code: outcome.error_code,
    created_at: iso(dispatch.created_at),
  });
}

/** `connection.needs_reauth`: the connection became `needs_reauth`; `reason`: the error code, e.g. `invalid_grant`. */
export function connectionNeedsReauth(
  connection: ConnectionFacts,
  change: { previous_status: string; reason: string | null; message: string | null },
  at: Date,
) {
  return event('connection.needs_reauth', at, {
    ...aboutConnection(connection),
    status: 'needs_reauth' as const,
    previous_status: change.previous_status,
    reason: change.reason,
    message: change.message,
  });
}

/**
 * `connection.recovered`: `connection` is active and the tenant's broken one is not any more — the same connection
 * (`replacedConnectionId` null), or the one a new consent replaced.
 */
export function connectionRecovered(
  connection: ConnectionFacts,
  replacedConnectionId: string | null,
  at: Date,
) {
  return event('connection.recovered', at, {
    ...aboutConnection(connection),
    status: 'active' as const,
    previous_status: 'needs_reauth' as const,
    replaced_connection_id: replacedConnectionId,
  });
}

/** `events: ["*"]` subscribes to every event, including ones added later. */
export const ALL_EVENTS = '*';

/** At most this many endpoints per tenant (disabled ones included). */
export const MAX_ENDPOINTS_PER_TENANT = 10;
export const MAX_URL_LENGTH = 2048;

/**
 * The default retry schedule (ms after each failed attempt): 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h,
 * then every 8 h, until `WEBHOOK_GIVE_UP_AFTER_MS` has passed since the event was queued.
 */
export const DEFAULT_RETRY_SCHEDULE_MS = [
  5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000,
];

/** The wait after the `attempts`-th failed attempt (1-based), ±10 % jitter so retries of a burst spread out. */
export function retryDelayMs(schedule: readonly number[], attempts: number, random = Math.random): number {
  const base = schedule[Math.min(Math.max(attempts, 1), schedule.length) - 1];
  return Math.max(1, Math.round(base * (0.9 + 0.2 * random())));
}

/** A standard-webhooks signing secret: `whsec_` + base64 of 32 random bytes. */
export const SECRET_PREFIX = 'whsec_';
