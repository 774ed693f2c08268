import { Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error';
import { Clock } from '../common/clock';
import { span } from '../common/tracing';
import type { DispatchConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';
import { RewardsApiError, mapUpstreamError } from '../rewards-api/rewards-api.errors';
import { type OrderRequest, type UpstreamOrder, orderOutcome } from '../rewards-api/rewards-api.types';
import type { ConnectionClient } from '../rewards-api/connection-client';
import { SlotTooFarError } from '../rewards-api/account-pacer';
import { serving } from '../common/request-context';
import { RewardsApi } from '../token-vault/rewards-api.service';
import {
  AppCredentialsInvalidError,
  ConnectionNotActiveError,
  ConnectionNotFoundError,
} from '../token-vault/token-vault.errors';
import { REWARD_LINK, Vault } from '../token-vault/vault.service';
import { dispatchCompleted, rewardSent } from '../tenant-webhooks/webhook-events';
import { DispatchStore, type DispatchUpdate, type RewardUpdate } from './dispatch.store';
import {
  type CancelReason,
  type DispatchRow,
  type RewardError,
  cancelledError,
  type RewardRow,
  countsOf,
  failureBody,
  httpStatusOf,
  isSettled,
  statusOf,
  toView,
} from './dispatch.view';

export interface HttpOutcome {
  status: number;
  body: unknown;
  replayed?: boolean;
  headers?: Record<string, string>;
}

export function backoffMs(baseMs: number, attempts: number, maxMs = 5 * 60_000): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(exp / 2 + Math.random() * (exp / 2)); // "equal jitter": spread, but never near zero
}

/** Orders of one dispatch in flight at once (each still waits for its account slot). */
const LANES = 8;

/** One attempt at a dispatch, shared by its lanes. */
interface Attempt {
  row: DispatchRow;
  /** The rewards at hand (inline: all of the dispatch), updated in memory as outcomes are decided. */
  rewards: RewardRow[];
  units: RewardRow[][];
  client: ConnectionClient | null;
  /** Positions the insert already wrote as `sending` (the request's own first attempt). */
  marked: ReadonlySet<number>;
  inline: boolean;
  /** Outcomes decided and not written yet: they go with the next statement. */
  carry: RewardUpdate[];
  /** The first transient failure: the attempt stops and the dispatch is queued. */
  interruption: Interruption | null;
  stop: boolean;
  progressed: boolean;
  inFlight: Set<number>;
  /** How far out the account's next slot lay beyond the interactive bound (ms): nothing more went out. */
  deferredMs: number | null;
}

/** Why an attempt stopped early: the upstream (or the token vault) could not take the order now. */
interface Interruption {
  error: RewardError;
  retryAfterMs: number;
}

/**
 * One attempt at a dispatch this process holds (status `sending`): sends every reward not settled yet and records
 * each outcome before the next call. In the `single` shape each reward is its own order with its own external_id; in
 * the `array` shape all of them go as one order. A transient failure stops the attempt and queues the dispatch; the
 * next attempt (any instance, or after a crash) sends only the rest, with the same external_ids, so the rewards
 * service never creates an order twice.
 */
@Injectable()
export class DispatchSender {
  private readonly logger = new Logger(DispatchSender.name);

  constructor(
    @InjectConfig('dispatch') private readonly config: DispatchConfig,
    private readonly vault: Vault,
    private readonly store: DispatchStore,
    private readonly rewardsApi: RewardsApi,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
  ) {}

  /**
   * One attempt. `inline`: the caller waits — `rewards` holds every reward of the dispatch, and the status and answer
   * are derived from them in memory, its orders going first at the account's pace until the bound counted from the
   * request's arrival. Otherwise (the worker, bulk pace) `rewards` is one slice of the open rewards; `more`: others
   * remain after it (the dispatch is queued again, due now, so the workers go round the accounts).
   */
  async run(
    row: DispatchRow,
    rewards: RewardRow[],
    opts: { inline?: boolean; marked?: ReadonlySet<number>; more?: boolean; arrivedAt?: number } = {},
  ): Promise<HttpOutcome> {
    const inline = opts.inline ?? false;
    const open = rewards.filter((r) => !isSettled(r.status));
    const bound = inline ? (opts.arrivedAt ?? this.clock.now()) + this.config.interactiveMaxWaitMs : null;
    const a: Attempt = {
      row,
      rewards,
      units: row.order_shape === 'array' ? (open.length ? [open] : []) : open.map((r) => [r]),
      client: row.connection_id
        ? this.rewardsApi.forConnection(row.connection_id, inline ? 'interactive' : 'bulk', bound)
        : null,
      marked: opts.marked ?? new Set<number>(),
      inline,
      carry: [],
      interruption: null,
      stop: false,
      progressed: false,
      inFlight: new Set(),
      deferredMs: null,
    };
    let next = 0;
    // The request's first order goes alone: if our app credentials are refused there, the dispatch is forgotten.
    if (inline && a.units.length) await this.sendUnit(a, next++);
    // Up to LANES orders in flight; each takes its account slot in turn, so the pace holds while latency overlaps.
    const lane = async () => {
      while (!a.stop && next < a.units.length) await this.sendUnit(a, next++);
    };
    await Promise.all(Array.from({ length: Math.min(LANES, a.units.length) }, lane));
    if (a.interruption && row.attempts >= this.config.maxAttempts) {
      // Give up: what never reached a settled state fails (an unknown outcome is said so).
      const reason = a.interruption.error;
      const gaveUp: RewardError = {
        ...reason,
        message: `Gave up after ${row.attempts} attempts: ${reason.message}`,
      };
      if (!inline) {
        await this.store.write(row.id, a.carry, null);
        await this.store.settle(row.id, gaveUp);
        return { status: 202, body: null };
      }
      const failed = rewards.filter((r) => !isSettled(r.status));
      a.carry = a.carry.filter((u) => !failed.some((r) => r.position === u.position));
      this.decide(
        a,
        failed.map((r) => ({
          position: r.position,
          status: 'failed',
          last_error: { ...gaveUp, outcome_unknown: r.status === 'sending' },
        })),
      );
      a.interruption = null;
    }
    return inline ? this.finish(a) : this.finishSlice(a, opts.more ?? false);
  }

  /** Outcomes are applied to the rows in memory as decided, so the derived status and answer match what is written. */
  private decide(a: Attempt, updates: RewardUpdate[]): void {
    apply(a.rewards, updates);
    a.carry.push(...updates);
    if (updates.some((u) => isSettled(u.status))) a.progressed = true;
  }

  /** One order: mark its rewards `sending` (with the outcomes decided so far), call, decide. */
  private async sendUnit(a: Attempt, index: number): Promise<void> {
    const unit = a.units[index];
    const starts = unit
      .filter((r) => !a.marked.has(r.position))
      .map((r): RewardUpdate => ({
        position: r.position,
        status: 'sending',
        bump: 1,
        last_error: r.last_error,
      }));
    for (const r of unit) a.inFlight.add(r.position);
    try {
      if (a.carry.length || starts.length) {
        const written = await this.store.write(a.row.id, [...a.carry.splice(0), ...starts], null);
        if (written.connectionStatus === 'disconnected' || written.connectionStatus === null) {
          // Disconnected since this attempt began (on any instance): nothing more goes out.
          a.stop = true;
          this.decide(a, this.cancel(a.rewards, a.inFlight, 'disconnected'));
          return;
        }
        if (written.cancelRequested) {
          a.stop = true;
          this.decide(a, this.cancel(a.rewards, a.inFlight, 'requested'));
        }
        // Only rewards this write really marked go out: one cancelled meanwhile stays unsent.
        const refused = unit.filter(
          (r) => starts.some((u) => u.position === r.position) && !written.changed.has(r.position),
        );
        if (refused.length) return this.decide(a, this.cancel(refused, new Set(), 'requested'));
        apply(a.rewards, starts);
      }
      await this.callUnit(a, index);
    } finally {
      for (const r of unit) a.inFlight.delete(r.position);
    }
  }

  private async callUnit(a: Attempt, index: number): Promise<void> {
    const { row, client } = a;
    const unit = a.units[index];
    try {
      if (!client) throw new ConnectionNotFoundError();
      const { status, order } = await serving(
        { dispatchId: row.id, rewardPosition: unit.length === 1 ? unit[0].position : null },
        () => client.createOrder(this.orderFor(row, unit), this.config.upstreamTimeoutMs),
      );
      if (status === 201)
        this.logger.log(
          { dispatchId: row.id, orderId: order.id },
          'order already existed upstream (a retry); not sent twice',
        );
      this.decide(a, this.settled(row, unit, order));
    } catch (error) {
      if (error instanceof SlotTooFarError) {
        // Nothing went out: the rest of the dispatch is queued for the workers, due when the slot comes.
        a.deferredMs = Math.max(a.deferredMs ?? 0, error.waitMs);
        a.stop = true;
        this.decide(
          a,
          unit.map((r) => ({ position: r.position, status: 'pending', last_error: r.last_error })),
        );
        return;
      }
      if (error instanceof AppCredentialsInvalidError && a.inline && index === 0) {
        // Our own app credentials were refused before the first order could go: nothing reached the service.
        await this.store.discard(row.id);
        throw error;
      }
      if (isGone(error)) {
        a.stop = true;
        return this.decide(a, this.cancel(a.rewards, new Set(), 'disconnected'));
      }
      const verdict = this.verdict(row, error);
      if ('failed' in verdict) {
        const { failed } = verdict;
        // A dead connection fails every reward still open and not in flight; a rejected order fails only its own.
        const dead = error instanceof ConnectionNotActiveError;
        const affected = dead
          ? a.rewards.filter(
              (r) =>
                !isSettled(r.status) &&
                (unit.includes(r) || (!a.inFlight.has(r.position) && a.units.some((u) => u.includes(r)))),
            )
          : unit;
        if (dead) a.stop = true;
        this.decide(
          a,
          affected.map((r) => ({ position: r.position, status: 'failed', last_error: failed })),
        );
        this.metrics.dispatchAttempts.inc({ outcome: 'failed' }, affected.length);
        return;
      }
      const { interruption } = verdict;
      a.interruption ??= interruption;
      a.stop = true;
      const status = interruption.error.outcome_unknown ? 'sending' : 'pending';
      this.decide(
        a,
        unit.map((r) => ({ position: r.position, status, last_error: interruption.error })),
      );
      this.metrics.dispatchAttempts.inc({ outcome: 'queued' }, unit.length);
    }
  }

  /**
   * Queued again: after an interruption with a backoff; inline, when the account's next slot lay beyond the
   * interactive bound, due when that slot comes (not attempted: the give-up count starts again).
   */
  private requeue(a: Attempt): DispatchUpdate {
    const { row, interruption, progressed, inline } = a;
    const backoff = interruption
      ? Math.max(
          interruption.retryAfterMs,
          backoffMs(this.config.retryBaseMs, progressed ? 1 : row.attempts, this.config.retryMaxMs),
        )
      : 0;
    const error = interruption?.error as unknown as Record<string, unknown> | undefined;
    return {
      status: 'queued',
      response_status: 202,
      last_error: inline ? (error as Record<string, unknown>) : (error ?? row.last_error),
      next_attempt_at: new Date(this.clock.now() + (inline ? Math.max(backoff, a.deferredMs ?? 0) : backoff)),
      sent_at: null,
      reset_attempts: progressed || (inline && !interruption),
    };
  }

  /** The worker's end of an attempt: queued again, or settled from the stored rewards. */
  private async finishSlice(a: Attempt, more: boolean): Promise<HttpOutcome> {
    const { row, carry } = a;
    if (a.interruption || (more && !a.stop))
      await span('dispatch.write', () => this.store.write(row.id, carry, this.requeue(a)));
    else {
      if (carry.length) await span('dispatch.write', () => this.store.write(row.id, carry, null));
      await span('dispatch.settle', () => this.store.settle(row.id));
    }
    return { status: 202, body: null };
  }

  /** The inline attempt's end: settled from the rewards in memory, or queued for the workers. */
  private async finish(a: Attempt): Promise<HttpOutcome> {
    const { row, rewards } = a;
    const derived = a.interruption || a.deferredMs !== null ? null : statusOf(countsOf(rewards));
    const now = new Date(this.clock.now());
    const failure = derived === 'failed' || derived === 'cancelled' ? failureBody(row, rewards) : null;
    const last_error = failure && { code: failure.body.error.code, message: failure.body.error.message };
    const update: DispatchUpdate = !derived
      ? this.requeue(a)
      : {
          status: derived,
          response_status: failure ? failure.status : httpStatusOf(derived),
          last_error,
          next_attempt_at: null,
          sent_at: rewards.some((r) => r.status === 'sent') ? now : null,
          // Every reward of the dispatch is here (inline): the counts are known without a query.
          event: dispatchCompleted(
            { ...row, external_reference: row.request.external_reference },
            { status: derived, counts: countsOf(rewards), error_code: last_error?.code ?? null },
            now,
          ),
        };
    await span('dispatch.write', () => this.store.write(row.id, a.carry, update), { 'dispatch.id': row.id });
    Object.assign(row, {
      status: update.status,
      last_error: update.last_error,
      next_attempt_at: update.next_attempt_at,
      sent_at: row.sent_at ?? update.sent_at,
      lease_until: null,
    });
    // A queued dispatch's answer is the caller's (see RewardDispatchService.accepted).
    return { status: update.response_status, body: failure ? failure.body : this.view(row, rewards) };
  }

  view(row: DispatchRow, rewards: RewardRow[], stored?: Parameters<typeof toView>[3]) {
    return toView(
      row,
      rewards,
      (r) => (r.link_enc ? this.vault.open(REWARD_LINK, r.dispatch_id, r.position, r.link_enc) : null),
      stored,
    );
  }

  /** The exact order for these rewards, rebuilt from what was stored at insert: the same bytes on every retry. */
  private orderFor(row: DispatchRow, unit: RewardRow[]): OrderRequest {
    const payment = { funding_source_id: row.upstream_payload.payment.funding_source_id };
    if (row.order_shape === 'array')
      return { external_id: row.id, payment, rewards: unit.map((r) => r.upstream_payload) };
    return { external_id: unit[0].external_id, payment, reward: unit[0].upstream_payload };
  }

  /** The order's status decides, whatever the HTTP code: executed → sent; held → pending_approval; canceled → failed. */
  private settled(row: DispatchRow, unit: RewardRow[], order: UpstreamOrder): RewardUpdate[] {
    const outcome = orderOutcome(order.status);
    const now = new Date(this.clock.now());
    return unit.map((r, i) => {
      const upstream = order.rewards[i];
      const link = upstream?.delivery?.link;
      const base = {
        position: r.position,
        upstream_order_id: order.id,
        upstream_reward_id: upstream?.id ?? null,
        upstream_order_status: order.status,
        delivery_status: upstream?.delivery?.status ?? null,
        link_enc: link ? this.vault.seal(REWARD_LINK, r.dispatch_id, r.position, link) : null,
      };
      this.metrics.dispatchAttempts.inc({
        outcome: outcome === 'executed' ? 'sent' : outcome === 'held' ? 'pending_approval' : 'failed',
      });
      if (outcome === 'executed') {
        const sent = { ...base, status: 'sent' as const, last_error: null, sent_at: now };
        // Its event says what the store writes: a reward id the service did not give keeps the one recorded.
        const reward = { ...r, ...sent, upstream_reward_id: sent.upstream_reward_id ?? r.upstream_reward_id };
        return { ...sent, event: rewardSent(row, reward, now) };
      }
      if (outcome === 'held')
        return {
          ...base,
          status: 'pending_approval',
          last_error: null,
          next_check_at: new Date(now.getTime() + this.config.approvalCheckMs),
        };
      return {
        ...base,
        status: 'failed',
        last_error: {
          code: 'order_failed',
          message: `The rewards service created the order with status ${order.status}.`,
        },
      };
    });
  }

  /** Every reward not settled yet and not in flight ends `cancelled`: none of them is sent. */
  private cancel(rewards: RewardRow[], inFlight: ReadonlySet<number>, why: CancelReason): RewardUpdate[] {
    const open = rewards.filter((r) => !isSettled(r.status) && !inFlight.has(r.position));
    this.metrics.dispatchAttempts.inc({ outcome: 'cancelled' }, open.length);
    return open.map((r) => ({ position: r.position, status: 'cancelled', last_error: cancelledError(why) }));
  }

  /** A failure no retry can fix (the reward's error), or an interruption (the dispatch is tried again later). */
  private verdict(
    row: DispatchRow,
    error: unknown,
  ): { failed: RewardError } | { interruption: Interruption } {
    if (error instanceof ConnectionNotActiveError)
      return { failed: { code: 'connection_not_active', message: error.message } };
    if (error instanceof RewardsApiError) {
      const f = mapUpstreamError(error, 'the order');
      if (f.code === 'external_id_conflict' && !f.retryable)
        this.logger.error('BUG SIGNAL: the rewards service holds another order with this external_id');
      const base = { code: f.code, message: f.message, upstream_status: f.upstreamStatus };
      if (!f.retryable) return { failed: { ...base, upstream_payload: f.upstreamPayload } };
      // The service documents no Retry-After on its 429s: pause at least a second, as its docs advise.
      const retryAfterMs = (f.retryAfterSeconds ?? (f.code === 'upstream_rate_limited' ? 1 : 0)) * 1000;
      return { interruption: { error: { ...base, outcome_unknown: f.outcomeUnknown }, retryAfterMs } };
    }
    if (error instanceof AppError)
      // The vault could not give a token now (refresh cooldown, lock timeout, app credentials refused).
      return {
        interruption: {
          error: { code: error.code as RewardError['code'], message: error.message, outcome_unknown: false },
          retryAfterMs: Number(error.headers['Retry-After'] ?? 0) * 1000,
        },
      };
    const message = error instanceof Error ? error.message : String(error);
    this.logger.error({ dispatchId: row.id, err: message }, 'unexpected error while sending');
    return {
      interruption: {
        error: { code: 'upstream_unavailable', message, outcome_unknown: true },
        retryAfterMs: 0,
      },
    };
  }
}

/** The connection was disconnected (its grant is gone with it): what is not sent yet must not be sent. */
function isGone(error: unknown): boolean {
  return (
    error instanceof ConnectionNotFoundError ||
    (error instanceof ConnectionNotActiveError && error.connectionStatus === 'disconnected')
  );
}

/** Applies updates to the in-memory rows, so the derived status and the answer match what was written. */
function apply(rewards: RewardRow[], updates: RewardUpdate[]): void {
  for (const u of updates) {
    const r = rewards.find((x) => x.position === u.position);
    if (!r) continue;
    r.status = u.status;
    // As the store does: a sent EMAIL / PHONE reward's delivery is followed from here on.
    if (u.status === 'sent' && r.delivery_method !== 'LINK' && !r.delivery_state)
      r.delivery_state = 'pending';
    if (u.bump) r.attempts += 1;
    if (u.upstream_order_id !== undefined) r.upstream_order_id = u.upstream_order_id;
    if (u.upstream_reward_id !== undefined) r.upstream_reward_id = u.upstream_reward_id;
    if (u.upstream_order_status !== undefined) r.upstream_order_status = u.upstream_order_status;
    if (u.delivery_status !== undefined) r.delivery_status = u.delivery_status;
    if (u.link_enc) r.link_enc = u.link_enc;
    if (u.last_error !== undefined) r.last_error = u.last_error;
    if (u.sent_at) r.sent_at = u.sent_at;
  }
}
