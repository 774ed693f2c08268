import type { OrderShape, RewardsEnvironment } from '../config/app-config';
import type { ResolvedCustomField } from '../fields-cache/custom-fields';
import type { UpstreamErrorCode } from '../rewards-api/rewards-api.errors';
import type { UpstreamRewardSpec } from '../rewards-api/rewards-api.types';
import type { TokenVaultErrorCode } from '../token-vault/token-vault.errors';
import type { DispatchErrorCode } from './reward-dispatch.errors';

/**
 * A dispatch: one send request (one Idempotency-Key) of one or more rewards. `sending` (a process holds it) or
 * `queued` while worked on; once every reward is settled, derived from them (statusOf).
 */
export const DISPATCH_STATUSES = [
  'sending',
  'queued',
  'sent',
  'pending_approval',
  'partially_failed',
  'failed',
  'cancelled',
] as const;
export type DispatchStatus = (typeof DISPATCH_STATUSES)[number];
/** Once every reward is settled: a dispatch never goes back to `sending` / `queued` from these. */
export type SettledStatus = Exclude<DispatchStatus, 'sending' | 'queued'>;

/**
 * One reward of a dispatch: `pending` (never sent), `sending` (a call may be under way or its outcome is unknown),
 * `sent`, `pending_approval` (held for approval upstream), `failed` (with the reason), `cancelled` (never sent).
 */
export const REWARD_STATUSES = [
  'pending',
  'sending',
  'sent',
  'pending_approval',
  'failed',
  'cancelled',
] as const;
export type RewardStatus = (typeof REWARD_STATUSES)[number];

const CANCELLED_BECAUSE = {
  disconnected: 'The rewards connection was disconnected',
  requested: 'The dispatch was cancelled',
  erased: 'The recipient was erased',
};
export type CancelReason = keyof typeof CANCELLED_BECAUSE;

/** The error of a reward cancelled before it was sent. */
export const cancelledError = (why: CancelReason): RewardError => ({
  code: 'dispatch_cancelled',
  message: `${CANCELLED_BECAUSE[why]} before this reward was sent; it was not sent.`,
});

export const isSettled = (status: RewardStatus) => status !== 'pending' && status !== 'sending';

export interface DispatchRow {
  id: string;
  tenant_id: string;
  connection_id: string | null;
  environment: RewardsEnvironment;
  order_shape: OrderShape;
  idempotency_key: string;
  request_hash: string;
  request: {
    external_reference: string | null;
    funding_source_id: string;
    custom_fields: ResolvedCustomField[][];
    /** Allowed but flagged when stored: the same recipient twice (at most 100 listed). */
    warnings?: { field?: string; reason: string }[];
  };
  /** `{payment}`: what every order of the dispatch shares. */
  upstream_payload: { payment: { funding_source_id: string } };
  status: DispatchStatus;
  attempts: number;
  next_attempt_at: Date | null;
  lease_until: Date | null;
  upstream_order_id: string | null;
  last_error: Record<string, unknown> | null;
  response_status: number | null;
  response_body: unknown;
  created_at: Date;
  updated_at: Date;
  sent_at: Date | null;
  /** How many rewards the dispatch holds (0 on rows from before batches). */
  reward_count: number;
  /** 0: interactive (answered inline); 1: bulk (a batch, answered 202 at once, sent behind interactive work). */
  priority: 0 | 1;
  cancel_requested_at: Date | null;
}

/** A dispatch's progress: how many of its rewards are settled, and when the rest should be, at the account's pace. */
export interface Progress {
  total: number;
  settled: number;
  percent: number;
  estimated_completion_at: string | null;
}

/** A reward's failure: an upstream answer, the vault's verdict on the connection, or the dispatch's own. */
export interface RewardError {
  code: UpstreamErrorCode | TokenVaultErrorCode | DispatchErrorCode;
  message: string;
  upstream_status?: number | null;
  upstream_payload?: unknown;
  outcome_unknown?: boolean;
}

export interface RewardRow {
  dispatch_id: string;
  position: number;
  external_id: string;
  status: RewardStatus;
  upstream_payload: UpstreamRewardSpec;
  attempts: number;
  upstream_order_id: string | null;
  upstream_reward_id: string | null;
  upstream_order_status: string | null;
  delivery_method: string | null;
  delivery_status: string | null;
  /** Ours: `pending` (sent, not known delivered yet), `delivered`, `delivery_failed`; null for LINK or unsent. */
  delivery_state?: 'pending' | 'delivered' | 'delivery_failed' | null;
  delivery_reason?: string | null;
  link_enc: string | null;
  last_error: RewardError | null;
  sent_at: Date | null;
}

/**
 * The status of a dispatch from its rewards' counts, the one statement of this rule (the sender applies it in memory,
 * the store to the stored counts): null while any reward is unsettled; else `cancelled` or `failed` when none went out
 * (cancelled when any was cancelled), `partially_failed` when some did, `pending_approval` when all did and some are
 * held for approval, `sent`.
 */
export function statusOf(counts: Record<RewardStatus, number>): SettledStatus | null {
  if (counts.pending + counts.sending > 0) return null;
  const total = totalOf(counts);
  const out = counts.sent + counts.pending_approval;
  if (out === 0) return counts.cancelled > 0 ? 'cancelled' : 'failed';
  if (out < total) return 'partially_failed';
  return counts.pending_approval > 0 ? 'pending_approval' : 'sent';
}

/**
 * A dispatch none of whose rewards went out (`failed` / `cancelled`), from its rewards' error codes: the code is their
 * common one, else `upstream_rejected`; the HTTP status 503 when every failure was a give-up on an unavailable
 * upstream, 409 when it was cancelled or its connection is not active, else 422.
 */
export function failureOf(status: DispatchStatus, codes: Iterable<string>): { code: string; status: number } {
  const distinct = new Set(codes);
  const code = distinct.size === 1 ? [...distinct][0] : 'upstream_rejected';
  const gaveUp =
    distinct.size > 0 &&
    [...distinct].every((c) => c === 'upstream_unavailable' || c === 'upstream_rate_limited');
  const conflict =
    status === 'cancelled' || code === 'connection_not_active' || code === 'dispatch_cancelled';
  return { code, status: gaveUp ? 503 : conflict ? 409 : 422 };
}

/** The HTTP status a dispatch answers with (for all-failed dispatches see `failureBody`). */
export function httpStatusOf(status: DispatchStatus): number {
  return status === 'sent' || status === 'partially_failed' ? 201 : 202;
}

/** A time as ISO 8601, null for none (as a query parameter: cheaper than pg's local-time formatting of a Date). */
export const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : null);

export const totalOf = (counts: Record<RewardStatus, number>) =>
  Object.values(counts).reduce((a, b) => a + b, 0);

/** Counts per reward status (all 0 for no rewards) of rewards, or of rows that count `n` rewards each. */
export function countsOf(rewards: { status: RewardStatus; n?: number }[]): Record<RewardStatus, number> {
  const counts = Object.fromEntries(REWARD_STATUSES.map((s) => [s, 0])) as Record<RewardStatus, number>;
  for (const r of rewards) counts[r.status] += r.n ?? 1;
  return counts;
}

/**
 * The dispatch as the API shows it: every reward with its external_id, status, upstream order and reward ids and,
 * for LINK delivery, the redemption link (decrypted by `link`). Custom fields always carry their labels.
 */
export function toView(
  row: DispatchRow,
  rewards: RewardRow[],
  link: (r: RewardRow) => string | null = () => null,
  stored?: { counts: Record<RewardStatus, number>; progress: Progress },
) {
  const orderIds = new Set(rewards.map((r) => r.upstream_order_id));
  const counts = stored?.counts ?? countsOf(rewards);
  return {
    id: row.id,
    status: row.status,
    environment: row.environment,
    order_shape: row.order_shape,
    idempotency_key: row.idempotency_key,
    external_reference: row.request.external_reference,
    funding_source_id: row.request.funding_source_id,
    upstream_order_id: orderIds.size === 1 ? [...orderIds][0] : null,
    attempts: row.attempts,
    next_attempt_at: row.status === 'queued' ? iso(row.next_attempt_at) : null,
    last_error: row.last_error,
    created_at: iso(row.created_at),
    sent_at: iso(row.sent_at),
    counts,
    progress: stored?.progress ?? progressOf(counts),
    cancel_requested_at: iso(row.cancel_requested_at),
    warnings: row.request.warnings ?? [],
    rewards_truncated: rewards.length < totalOf(counts),
    rewards: rewards.map((r) => ({
      position: r.position,
      external_id: r.external_id,
      status: r.status,
      id: r.upstream_reward_id,
      upstream_order_id: r.upstream_order_id,
      upstream_order_status: r.upstream_order_status,
      recipient: r.upstream_payload.recipient,
      value: r.upstream_payload.value,
      products: r.upstream_payload.products ?? null,
      campaign_id: r.upstream_payload.campaign_id ?? null,
      delivery: {
        method: r.delivery_method ?? r.upstream_payload.delivery.method,
        status: r.delivery_status,
        state: r.delivery_state ?? null,
        ...(r.delivery_reason ? { failure_reason: r.delivery_reason } : {}),
        ...(r.link_enc ? { link: link(r) } : {}),
      },
      custom_fields: row.request.custom_fields[r.position] ?? [],
      error: r.status === 'failed' || r.status === 'cancelled' ? r.last_error : null,
      sent_at: iso(r.sent_at),
    })),
  };
}

/**
 * Progress from counts; `msPerReward` (the account's pace) gives the estimate while rewards are open, counted from
 * `fromMs` (epoch ms: when they are due, see dueAt).
 */
export function progressOf(
  counts: Record<RewardStatus, number>,
  msPerReward: number | null = null,
  fromMs = 0,
): Progress {
  const total = totalOf(counts);
  const open = counts.pending + counts.sending;
  const settled = total - open;
  return {
    total,
    settled,
    percent: total ? Math.floor((settled / total) * 1000) / 10 : 100,
    estimated_completion_at:
      open > 0 && msPerReward !== null ? new Date(fromMs + open * msPerReward).toISOString() : null,
  };
}

/** When a dispatch's open rewards are due (epoch ms): its next attempt, or `now` when that is past or none is set. */
export function dueAt(row: Pick<DispatchRow, 'next_attempt_at'>, now: number): number {
  return row.next_attempt_at ? Math.max(now, new Date(row.next_attempt_at).getTime()) : now;
}

/** A dispatch whose every reward failed answers with the error shape (code and status: failureOf), a detail a reward. */
export function failureBody(
  row: DispatchRow,
  rewards: RewardRow[],
): { status: number; body: { error: { code: string; message: string; details: unknown[] } } } {
  const errors = rewards.map(
    (r): RewardError => r.last_error ?? { code: 'upstream_rejected', message: 'failed' },
  );
  const { code, status } = failureOf(
    row.status === 'cancelled' || rewards.some((r) => r.status === 'cancelled') ? 'cancelled' : 'failed',
    errors.map((e) => e.code),
  );
  const total = row.reward_count || rewards.length;
  const message =
    total === 1
      ? errors[0].message
      : `All ${total} rewards failed; see details${rewards.length < total ? ` (the first ${rewards.length})` : ''}.`;
  const details = rewards.map((r, i) => ({
    field: `rewards[${r.position}]`,
    reason: errors[i].message,
    code: errors[i].code,
    dispatch_id: row.id,
    external_id: r.external_id,
    upstream_status: errors[i].upstream_status ?? null,
    upstream_payload: errors[i].upstream_payload ?? null,
  }));
  return { status, body: { error: { code, message, details } } };
}
