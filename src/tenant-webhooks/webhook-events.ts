import type { RewardsEnvironment } from '../config/app-config';
import type { RewardStatus, SettledStatus } from '../reward-dispatch/dispatch.view';

/**
 * The events a tenant can subscribe an endpoint to: the public contract, in one place. Each event has one type for
 * its `data` (EventData), one builder below and one line in WEBHOOK_EVENTS, which says when it happens and is the
 * event table of docs/api.md (webhook-events.spec.ts keeps the two equal and pins every payload).
 *
 * The code that makes a change builds its events and writes them to the outbox in the same transaction
 * (`enqueueEvents` / `outboxInsert` of webhook.store.ts): the dispatch store and the sender for rewards and
 * dispatches, the connection state store for connections. Never a secret, a token or a redemption link in `data`.
 */

/** What an event about a dispatch (or one of its rewards) says of the dispatch. */
interface DispatchData {
  tenant_id: string;
  dispatch_id: string;
  environment: RewardsEnvironment;
  idempotency_key: string;
}

/** What an event about one reward says of it. */
interface RewardData extends DispatchData {
  position: number;
  external_id: string;
  status: RewardStatus;
  /** The rewards service's id of the reward. */
  reward_id: string | null;
  upstream_order_id: string | null;
  delivery_method: string | null;
}

export interface RewardSentData extends RewardData {
  status: 'sent';
  upstream_order_status: string | null;
  sent_at: string;
}

export interface RewardDeliveryData<S extends 'delivered' | 'delivery_failed'> extends RewardData {
  delivery_state: S;
  /** The rewards service's word for it. */
  delivery_status: string | null;
  /** Why it failed, when it did. */
  delivery_reason: string | null;
  delivery_event_at: string | null;
}

export interface DispatchCompletedData extends DispatchData {
  external_reference: string | null;
  status: SettledStatus;
  counts: Record<RewardStatus, number>;
  /** When every reward failed or was cancelled: why (the dispatch's error code). */
  error_code: string | null;
  created_at: string;
}

interface ConnectionData {
  tenant_id: string;
  connection_id: string;
  environment: RewardsEnvironment;
}

export interface ConnectionNeedsReauthData extends ConnectionData {
  status: 'needs_reauth';
  previous_status: string;
  /** The error code that broke it, e.g. `invalid_grant`. */
  reason: string | null;
  message: string | null;
}

export interface ConnectionRecoveredData extends ConnectionData {
  status: 'active';
  previous_status: 'needs_reauth';
  /** The broken connection a new consent replaced; null when the same connection is active again. */
  replaced_connection_id: string | null;
}

/** Every event's `data`, by type: the one list of event types. */
export interface EventData {
  'dispatch.completed': DispatchCompletedData;
  'reward.sent': RewardSentData;
  'reward.delivered': RewardDeliveryData<'delivered'>;
  'reward.delivery_failed': RewardDeliveryData<'delivery_failed'>;
  'connection.needs_reauth': ConnectionNeedsReauthData;
  'connection.recovered': ConnectionRecoveredData;
}
export type WebhookEventType = keyof EventData;

/** One event's body as delivered and signed: `{type, timestamp, data}` (Standard Webhooks style). */
export interface TenantEventOf<T extends WebhookEventType> {
  type: T;
  /** When the change happened: ISO 8601, UTC, milliseconds. */
  timestamp: string;
  data: EventData[T];
}
export type TenantEvent = { [T in WebhookEventType]: TenantEventOf<T> }[WebhookEventType];

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

// --- the builders: from the facts the changing code holds to the event ---

/** A dispatch as its store holds it (a DispatchRow has these). */
export interface DispatchFacts {
  id: string;
  tenant_id: string;
  environment: RewardsEnvironment;
  idempotency_key: string;
}

/** The fields every dispatch and reward event opens with. */
function aboutDispatch(dispatch: DispatchFacts) {
  return {
    tenant_id: dispatch.tenant_id,
    dispatch_id: dispatch.id,
    environment: dispatch.environment,
    idempotency_key: dispatch.idempotency_key,
  };
}

/** A reward as its store holds it (a RewardRow has these), as of the change. */
export interface RewardFacts {
  position: number;
  external_id: string;
  upstream_reward_id: string | null;
  upstream_order_id: string | null;
  delivery_method: string | null;
}

/** A connection as its store holds it, as of the change. */
export interface ConnectionFacts {
  id: string;
  tenant_id: string;
  environment: RewardsEnvironment;
}

const iso = (at: Date) => at.toISOString();

/** `reward.sent`: the reward became `sent` at `at` (`sent_at`: when it was sent, `at` when unknown). */
export function rewardSent(
  dispatch: DispatchFacts,
  reward: RewardFacts & { upstream_order_status: string | null; sent_at: Date | null },
  at: Date,
): TenantEventOf<'reward.sent'> {
  return {
    type: 'reward.sent',
    timestamp: iso(at),
    data: {
      ...aboutDispatch(dispatch),
      position: reward.position,
      external_id: reward.external_id,
      status: 'sent',
      reward_id: reward.upstream_reward_id,
      upstream_order_id: reward.upstream_order_id,
      upstream_order_status: reward.upstream_order_status,
      delivery_method: reward.delivery_method,
      sent_at: iso(reward.sent_at ?? at),
    },
  };
}

/** The delivery outcome the store recorded for a reward (`status`: the reward's, `sent` or `pending_approval`). */
export interface DeliveryFacts extends RewardFacts {
  status: RewardStatus;
  delivery_status: string | null;
  delivery_reason: string | null;
  delivery_event_at: Date | null;
}

function delivery<S extends 'delivered' | 'delivery_failed'>(
  state: S,
  dispatch: DispatchFacts,
  reward: DeliveryFacts,
): RewardDeliveryData<S> {
  return {
    ...aboutDispatch(dispatch),
    position: reward.position,
    external_id: reward.external_id,
    status: reward.status,
    reward_id: reward.upstream_reward_id,
    upstream_order_id: reward.upstream_order_id,
    delivery_method: reward.delivery_method,
    delivery_state: state,
    delivery_status: reward.delivery_status,
    delivery_reason: reward.delivery_reason,
    delivery_event_at: reward.delivery_event_at ? iso(reward.delivery_event_at) : null,
  };
}

/** `reward.delivered`: the reward's delivery became `delivered`. */
export function rewardDelivered(
  dispatch: DispatchFacts,
  reward: DeliveryFacts,
  at: Date,
): TenantEventOf<'reward.delivered'> {
  return { type: 'reward.delivered', timestamp: iso(at), data: delivery('delivered', dispatch, reward) };
}

/** `reward.delivery_failed`: the reward's delivery became `delivery_failed`. */
export function rewardDeliveryFailed(
  dispatch: DispatchFacts,
  reward: DeliveryFacts,
  at: Date,
): TenantEventOf<'reward.delivery_failed'> {
  return {
    type: 'reward.delivery_failed',
    timestamp: iso(at),
    data: delivery('delivery_failed', dispatch, reward),
  };
}

/**
 * `dispatch.completed`: the dispatch left `sending` / `queued` for a settled status. `counts`: its rewards per status
 * after the change; `error_code`: the dispatch's error code, when none of its rewards went out.
 */
export function dispatchCompleted(
  dispatch: DispatchFacts & { external_reference: string | null; created_at: Date },
  outcome: {
    status: DispatchCompletedData['status'];
    counts: Record<RewardStatus, number>;
    error_code: string | null;
  },
  at: Date,
): TenantEventOf<'dispatch.completed'> {
  return {
    type: 'dispatch.completed',
    timestamp: iso(at),
    data: {
      ...aboutDispatch(dispatch),
      external_reference: dispatch.external_reference,
      status: outcome.status,
      counts: { ...outcome.counts },
      error_code: outcome.error_code,
      created_at: iso(dispatch.created_at),
    },
  };
}

/** `connection.needs_reauth`: the connection became `needs_reauth` (from `previousStatus`), for `reason`. */
export function connectionNeedsReauth(
  connection: ConnectionFacts,
  change: { previous_status: string; reason: string | null; message: string | null },
  at: Date,
): TenantEventOf<'connection.needs_reauth'> {
  return {
    type: 'connection.needs_reauth',
    timestamp: iso(at),
    data: {
      tenant_id: connection.tenant_id,
      connection_id: connection.id,
      environment: connection.environment,
      status: 'needs_reauth',
      previous_status: change.previous_status,
      reason: change.reason,
      message: change.message,
    },
  };
}

/**
 * `connection.recovered`: `connection` is active and the tenant's broken one is not any more — the same connection
 * (`replacedConnectionId` null), or the one a new consent replaced.
 */
export function connectionRecovered(
  connection: ConnectionFacts,
  replacedConnectionId: string | null,
  at: Date,
): TenantEventOf<'connection.recovered'> {
  return {
    type: 'connection.recovered',
    timestamp: iso(at),
    data: {
      tenant_id: connection.tenant_id,
      connection_id: connection.id,
      environment: connection.environment,
      status: 'active',
      previous_status: 'needs_reauth',
      replaced_connection_id: replacedConnectionId,
    },
  };
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
