import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppError } from '../common/app-error';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { RewardsApiError, mapUpstreamError } from '../rewards-api/rewards-api.errors';
import { type OrderRequest, type UpstreamOrder, orderOutcome } from '../rewards-api/rewards-api.types';
import { RewardsApi } from '../token-vault/rewards-api.service';
import {
  AppCredentialsInvalidError,
  ConnectionNotActiveError,
  ConnectionNotFoundError,
} from '../token-vault/token-vault.errors';
import { VaultCipher } from '../token-vault/vault-cipher';
import { DispatchStore, type DispatchUpdate, type RewardUpdate } from './dispatch.store';
import {
  type DispatchRow,
  type RewardError,
  type RewardRow,
  deriveStatus,
  failureBody,
  httpStatusOf,
  isSettled,
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

/** Why an attempt stopped early: the upstream (or the token vault) could not take the order now. */
interface Interruption {
  error: RewardError;
  retryAfterMs: number;
}

/**
 * One attempt at a dispatch this process holds (status `sending`): sends every reward that is not settled yet, in
 * position order, and records each outcome before the next call. In the `single` shape each reward is its own order
 * with its own external_id; in the `array` shape all of them go as one order. A transient failure stops the attempt
 * and queues the dispatch; the rewards already settled stay settled, and the next attempt (this process, another
 * instance, or after a crash) sends only the rest — the same external_ids, so the rewards service never creates an
 * order twice.
 */
@Injectable()
export class DispatchSender {
  private readonly logger = new Logger(DispatchSender.name);
  private readonly vault: VaultCipher;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly store: DispatchStore,
    private readonly rewardsApi: RewardsApi,
    private readonly metrics: MetricsService,
  ) {
    this.vault = new VaultCipher(config.vaultKeys);
  }

  /** `marked`: positions already written as `sending` by the insert (the request's own first attempt). */
  async run(
    row: DispatchRow,
    rewards: RewardRow[],
    marked: ReadonlySet<number> = new Set(),
  ): Promise<HttpOutcome> {
    const inline = marked.size > 0;
    const open = rewards.filter((r) => !isSettled(r.status));
    const units = row.order_shape === 'array' ? (open.length ? [open] : []) : open.map((r) => [r]);
    // Outcomes written with the next statement; applied to the rows in memory as they are decided, so the derived
    // status and the answer match what is written.
    let carry: RewardUpdate[] = [];
    const decide = (updates: RewardUpdate[]) => {
      apply(rewards, updates);
      return updates;
    };
    let interruption: Interruption | null = null;
    const client = row.connection_id ? this.rewardsApi.forConnection(row.connection_id) : null;
    for (const [index, unit] of units.entries()) {
      const starts = unit
        .filter((r) => !marked.has(r.position))
        .map((r): RewardUpdate => ({
          position: r.position,
          status: 'sending',
          bump: 1,
          last_error: r.last_error,
        }));
      if (carry.length || starts.length) {
        const { connectionStatus } = await this.store.write(row.id, [...carry, ...starts], null);
        apply(rewards, starts);
        carry = [];
        if (connectionStatus === 'disconnected' || connectionStatus === null) {
          // Disconnected since this attempt began (on any instance): nothing more goes out.
          carry = decide(this.cancel(rewards));
          break;
        }
      }
      try {
        if (!client) throw new ConnectionNotFoundError();
        const { status, order } = await client.createOrder(
          this.orderFor(row, unit),
          this.config.dispatch.upstreamTimeoutMs,
        );
        if (status === 201)
          this.logger.log(
            { dispatchId: row.id, orderId: order.id },
            'order already existed upstream (a retry); not sent twice',
          );
        carry = decide(this.settled(row, unit, order));
      } catch (error) {
        if (error instanceof AppCredentialsInvalidError && inline && index === 0) {
          // Our own app credentials were refused before the first order could go: nothing reached the service.
          await this.store.discard(row.id);
          throw error;
        }
        if (isGone(error)) {
          carry = decide(this.cancel(rewards));
          break;
        }
        const failed = this.definitive(error);
        if (failed) {
          // A dead connection fails every reward still open; a rejected order fails only its own.
          const affected = error instanceof ConnectionNotActiveError ? units.slice(index).flat() : unit;
          carry = decide(
            affected.map((r) => ({ position: r.position, status: 'failed', last_error: failed })),
          );
          this.metrics.dispatchAttempts.inc({ outcome: 'failed' }, affected.length);
          if (affected !== unit) break;
        } else {
          interruption = this.interruption(row, error);
          carry = decide(
            unit.map((r) => ({
              position: r.position,
              status: interruption?.error.outcome_unknown ? 'sending' : 'pending',
              last_error: interruption?.error ?? null,
            })),
          );
          this.metrics.dispatchAttempts.inc({ outcome: 'queued' }, unit.length);
          break;
        }
      }
    }
    if (interruption && row.attempts >= this.config.dispatch.maxAttempts) {
      // Give up: what never reached a settled state fails (an unknown outcome is said so in the reason).
      const reason = interruption.error;
      const gaveUp: RewardUpdate[] = rewards
        .filter((r) => !isSettled(r.status))
        .map((r) => ({
          position: r.position,
          status: 'failed',
          last_error: {
            ...reason,
            message: `Gave up after ${row.attempts} attempts: ${reason.message}`,
            outcome_unknown: r.status === 'sending',
          },
        }));
      carry = [...carry.filter((u) => !gaveUp.some((g) => g.position === u.position)), ...decide(gaveUp)];
      interruption = null;
    }
    return this.finish(row, rewards, carry, interruption);
  }

  private async finish(
    row: DispatchRow,
    rewards: RewardRow[],
    carry: RewardUpdate[],
    interruption: Interruption | null,
  ): Promise<HttpOutcome> {
    const derived = interruption ? null : deriveStatus(rewards);
    const now = new Date();
    let update: DispatchUpdate;
    let outcome: HttpOutcome;
    if (!derived) {
      const delay = Math.max(
        interruption?.retryAfterMs ?? 0,
        backoffMs(this.config.dispatch.retryBaseMs, row.attempts, this.config.dispatch.retryMaxMs),
      );
      const nextAttemptAt = new Date(now.getTime() + delay);
      update = {
        status: 'queued',
        responseStatus: 202,
        lastError: interruption?.error as unknown as Record<string, unknown>,
        nextAttemptAt,
        sentAt: null,
      };
      outcome = { status: 202, body: null, headers: { 'Retry-After': String(Math.ceil(delay / 1000)) } };
    } else {
      const sentAt = rewards.some((r) => r.status === 'sent') ? now : null;
      const failure = derived === 'failed' || derived === 'cancelled' ? failureBody(row, rewards) : null;
      const lastError = failure
        ? { code: failure.body.error.code, message: failure.body.error.message }
        : null;
      update = {
        status: derived,
        responseStatus: failure ? failure.status : httpStatusOf(derived),
        lastError,
        nextAttemptAt: null,
        sentAt,
      };
      outcome = { status: update.responseStatus, body: null };
    }
    await this.store.write(row.id, carry, update);
    Object.assign(row, {
      status: update.status,
      last_error: update.lastError,
      next_attempt_at: update.nextAttemptAt,
      sent_at: row.sent_at ?? update.sentAt,
      lease_until: null,
    });
    outcome.body =
      derived === 'failed' || derived === 'cancelled'
        ? failureBody(row, rewards).body
        : this.view(row, rewards);
    return outcome;
  }

  view(row: DispatchRow, rewards: RewardRow[]) {
    return toView(row, rewards, (r) => (r.link_enc ? this.vault.decrypt(r.link_enc, linkAad(r)) : null));
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
    const now = new Date();
    return unit.map((r, i) => {
      const upstream = order.rewards[i];
      const link = upstream?.delivery?.link;
      const base = {
        position: r.position,
        upstream_order_id: order.id,
        upstream_reward_id: upstream?.id ?? null,
        upstream_order_status: order.status,
        delivery_status: upstream?.delivery?.status ?? null,
        link_enc: link ? this.vault.encrypt(link, linkAad(r)) : null,
      };
      this.metrics.dispatchAttempts.inc({
        outcome: outcome === 'executed' ? 'sent' : outcome === 'held' ? 'pending_approval' : 'failed',
      });
      if (outcome === 'executed') return { ...base, status: 'sent', last_error: null, sent_at: now };
      if (outcome === 'held')
        return {
          ...base,
          status: 'pending_approval',
          last_error: null,
          next_check_at: new Date(now.getTime() + this.config.dispatch.approvalCheckMs),
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

  /** Every reward not settled yet ends `cancelled`: none of them is sent. */
  private cancel(rewards: RewardRow[]): RewardUpdate[] {
    const open = rewards.filter((r) => !isSettled(r.status));
    this.metrics.dispatchAttempts.inc({ outcome: 'cancelled' }, open.length);
    return open.map((r) => ({
      position: r.position,
      status: 'cancelled',
      last_error: {
        code: 'dispatch_cancelled',
        message: 'The rewards connection was disconnected before this reward was sent; it was not sent.',
      },
    }));
  }

  /** A failure no retry can fix, as the reward's error; null for transient ones. */
  private definitive(error: unknown): RewardError | null {
    if (error instanceof ConnectionNotActiveError)
      return { code: 'connection_not_active', message: error.message };
    if (!(error instanceof RewardsApiError)) return null;
    const failure = mapUpstreamError(error, 'the order');
    if (failure.retryable) return null;
    if (failure.code === 'external_id_conflict')
      this.logger.error('BUG SIGNAL: the rewards service holds another order with this external_id');
    return {
      code: failure.code,
      message: failure.message,
      upstream_status: failure.upstreamStatus,
      upstream_payload: failure.upstreamPayload,
    };
  }

  private interruption(row: DispatchRow, error: unknown): Interruption {
    if (error instanceof RewardsApiError) {
      const f = mapUpstreamError(error, 'the order');
      return {
        error: {
          code: f.code,
          message: f.message,
          upstream_status: f.upstreamStatus,
          outcome_unknown: f.outcomeUnknown,
        },
        // The service documents no Retry-After on its 429s: pause at least a second, as its docs advise.
        retryAfterMs: (f.retryAfterSeconds ?? (f.code === 'upstream_rate_limited' ? 1 : 0)) * 1000,
      };
    }
    if (error instanceof AppError) {
      // The vault could not give a token now (refresh cooldown, lock timeout, app credentials refused).
      return {
        error: { code: error.code as RewardError['code'], message: error.message, outcome_unknown: false },
        retryAfterMs: Number(error.headers['Retry-After'] ?? 0) * 1000,
      };
    }
    this.logger.error(
      { dispatchId: row.id, err: error instanceof Error ? error.message : String(error) },
      'unexpected error while sending',
    );
    return {
      error: {
        code: 'upstream_unavailable',
        message: error instanceof Error ? error.message : String(error),
        outcome_unknown: true,
      },
      retryAfterMs: 0,
    };
  }
}

const linkAad = (r: RewardRow) => `${r.dispatch_id}/${r.position}/link`;

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
