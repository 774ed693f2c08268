import { Injectable, Optional } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PacingConfig } from '../config/app-config';
import { Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

/** Interactive sends (answered inline) go ahead of bulk work (batches, probes, approval checks). */
export type Priority = 'interactive' | 'bulk';

export interface Slot {
  at: number; // performance.now(): this process's monotonic clock
}

/** The account's next slot lies further out than the caller may wait: none was taken. */
export class SlotTooFarError extends Error {
  constructor(readonly waitMs: number) {
    super(`the account's next request slot is ${Math.round(waitMs)} ms away`);
    this.name = 'SlotTooFarError';
  }
}

/**
 * The spacing between slots is widened by this much per second, so every 1-s interval stays within the limit even
 * when requests reach the service unevenly (network, its queues, a stalled process). Of it, LATE_MS is for leaving
 * late; a request later than that takes a new slot. 50 ms still drew occasional 429s across 4 instances.
 */
export const PACING_MARGIN_MS = 100;
const LATE_MS = 10;
/** A 429 halves the account's rate down to this fraction; every granted slot wins some of it back. */
const MIN_FACTOR = 0.1;
const RECOVERY_PER_SLOT = 0.02;

/** The spacing between two requests of an account (ms): `rps` in any 1 s, with `burst` back to back when idle. */
export function spacingMs(pacing: PacingConfig): number {
  return (1000 + PACING_MARGIN_MS) / (pacing.rps - pacing.burst + 1);
}

/**
 * Per-account pacing shared by every instance through Postgres: a GCRA whose state is one row per account (`tat`,
 * the theoretical arrival time of its next request). One statement takes a slot: slot = max(now, tat − τ),
 * tat' = max(tat, now) + T, T = spacingMs() / factor, τ = (burst − 1)·T. Postgres's clock decides; the caller sleeps
 * on its own monotonic clock, so instances' clocks are never compared.
 *
 * Interactive requests take the next slot unless it is beyond their bound (then none: SlotTooFarError); bulk ones
 * only when it is due within 1.5 spacings, so an interactive send waits about one slot, not behind a batch.
 * A 429 halves `factor` and pushes `tat` past its Retry-After; each granted slot wins a little back.
 */
@Injectable()
export class AccountPacer {
  /** Per account, the latest slot seen taken here (`tat` only moves forward): a too-far bound fails without a query. */
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly db: Database,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  /** Retention: deletes up to `limit` accounts not paced since `olderThan` (they start again idle). */
  purgeIdle(olderThan: Date, limit: number): Promise<number> {
    const text = batchDelete.matching('account_pace', 'account_key', 'updated_at < $1');
    return purgeBatch(this.db.main, text, olderThan, limit);
  }

  /** Waits for `account`'s next slot (check `missed` right before sending); beyond `maxWaitMs`: SlotTooFarError. */
  async acquire(
    account: string,
    pacing: PacingConfig,
    priority: Priority,
    maxWaitMs: number | null = null,
  ): Promise<Slot> {
    if (pacing.rps <= 0) return { at: performance.now() };
    const stop = this.metrics?.pacingWait.startTimer({ priority });
    const base = spacingMs(pacing);
    const horizon = priority === 'bulk' ? 1.5 * base : maxWaitMs;
    try {
      for (;;) {
        const known = this.knownWaitMs(account);
        if (horizon !== null && priority === 'interactive' && known > horizon)
          throw new SlotTooFarError(known);
        const slot = await this.reserve(account, pacing, base, horizon);
        if (slot === null) {
          if (priority === 'interactive') {
            const waitMs = await this.nextSlotInMs(account, pacing);
            this.sawSlot(account, performance.now() + waitMs);
            throw new SlotTooFarError(waitMs);
          }
          this.metrics?.pacingRetakes.inc({ reason: 'deferred' });
          await sleep(base); // bulk, and the next slot is further out: let interactive requests have it
          continue;
        }
        const at = slot.asked + Math.max(0, slot.waitMs);
        this.sawSlot(account, at);
        const left = at - performance.now();
        if (left > 0) await sleep(left);
        if (!this.missed({ at })) return { at };
      }
    } finally {
      stop?.();
    }
  }

  /** Whether a request would now leave too late for its slot: it then takes a new one instead of bunching up. */
  missed(slot: Slot): boolean {
    if (performance.now() - slot.at <= LATE_MS) return false;
    this.metrics?.pacingRetakes.inc({ reason: 'late' });
    return true;
  }

  /** At least how far out (ms) the account's next slot is, as this process knows. */
  knownWaitMs(account: string): number {
    return Math.max(0, (this.seen.get(account) ?? 0) - performance.now());
  }

  private sawSlot(account: string, at: number): void {
    if (at > (this.seen.get(account) ?? 0)) this.seen.set(account, at);
  }

  /** How far out the account's next slot is (ms, ≤ 0 = now), as every instance sees it. */
  private async nextSlotInMs(account: string, pacing: PacingConfig): Promise<number> {
    const { rows } = await this.db.relaxed.query<{ wait_ms: number }>({
      name: 'rg_pace_next',
      text: `SELECT extract(epoch FROM (tat - make_interval(secs => $3::float8 * $2::float8 / factor / 1000) - clock_timestamp())) * 1000 AS wait_ms
               FROM account_pace WHERE account_key = $1`,
      values: [account, spacingMs(pacing), pacing.burst - 1],
    });
    return rows[0] ? Number(rows[0].wait_ms) : 0;
  }

  /** A 429 came back anyway: slow the account down and keep its next request past `retryAfterMs`. */
  async throttled(account: string, retryAfterMs: number): Promise<void> {
    await this.db.main.query({
      name: 'rg_pace_throttled',
      text: `UPDATE account_pace
                SET factor = greatest($2::float8, factor / 2), throttled_429 = throttled_429 + 1,
                    tat = greatest(tat, clock_timestamp() + make_interval(secs => $3::float8 / 1000)), updated_at = clock_timestamp()
              WHERE account_key = $1`,
      values: [account, MIN_FACTOR, retryAfterMs],
    });
    this.metrics?.upstreamThrottled.inc();
  }

  /**
   * One slot: the wait (ms, ≤ 0 = now) from `asked`, taken after the pool wait so the slot is never early; null when
   * beyond `horizonMs`. Relaxed pool: a slot lost in a crash costs nothing, and a WAL flush would add jitter.
   */
  private async reserve(
    account: string,
    pacing: PacingConfig,
    base: number,
    horizonMs: number | null,
  ): Promise<{ asked: number; waitMs: number } | null> {
    const client = await this.db.relaxed.connect();
    const asked = performance.now();
    const { rows } = await client
      .query<{ wait_ms: number }>({
        name: 'rg_pace_reserve',
        text: `INSERT INTO account_pace AS p (account_key, tat, last_slot, factor, updated_at)
             VALUES ($1, clock_timestamp() + make_interval(secs => $2::float8 / 1000), clock_timestamp(), 1, clock_timestamp())
             ON CONFLICT (account_key) DO UPDATE
                SET last_slot = greatest(p.tat, clock_timestamp()) - make_interval(secs => $3::float8 * $2::float8 / p.factor / 1000),
                    tat = greatest(p.tat, clock_timestamp()) + make_interval(secs => $2::float8 / p.factor / 1000),
                    factor = least(1, p.factor + $5::float8), updated_at = clock_timestamp()
              WHERE $4::float8 IS NULL
                 OR p.tat - make_interval(secs => $3::float8 * $2::float8 / p.factor / 1000)
                    <= clock_timestamp() + make_interval(secs => $4::float8 / 1000)
             RETURNING extract(epoch FROM (last_slot - clock_timestamp())) * 1000 AS wait_ms`,
        values: [account, base, pacing.burst - 1, horizonMs, RECOVERY_PER_SLOT],
      })
      .finally(() => client.release());
    return rows.length ? { asked, waitMs: Number(rows[0].wait_ms) } : null;
  }
}
