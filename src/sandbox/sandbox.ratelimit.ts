import { performance } from 'node:perf_hooks';

/**
 * Per-account rate limit as a strict sliding window: at most N admitted requests in any 1000 ms interval.
 *
 * Each account keeps a ring buffer of the timestamps it admitted within the last second (at most N of them
 * while the limit is on). A request at time t first drops the timestamps ≤ t − 1000, then is admitted only if
 * fewer than N remain — so (t − 1000, t] never holds more than N. Refused requests are not recorded. Each
 * timestamp is pushed and dropped once: O(1) amortised per request.
 *
 * The same buffer gives `max_in_any_1s` exactly: the busiest 1-second interval can always be slid to end on an
 * admitted request, so the maximum of the buffer's length right after each admission is the answer. Requests
 * are recorded (and that maximum kept) even while the limit is off, so tests can check a client's own pacing.
 *
 * Time is the process's monotonic clock, not the sandbox's adjustable one (`/__control/clock/advance`).
 */
export interface RateLimitStats {
  admitted: number;
  rejected_429: number;
  max_in_any_1s: number;
}

const WINDOW_MS = 1000;

/** A growable FIFO of numbers on a circular array. */
class TimestampRing {
  private items = new Float64Array(16);
  private head = 0;
  length = 0;

  push(value: number): void {
    if (this.length === this.items.length) this.grow();
    this.items[(this.head + this.length) % this.items.length] = value;
    this.length += 1;
  }

  /** Drops the oldest values while they are ≤ `limit`. */
  dropUpTo(limit: number): void {
    while (this.length > 0 && this.items[this.head] <= limit) {
      this.head = (this.head + 1) % this.items.length;
      this.length -= 1;
    }
  }

  private grow(): void {
    const bigger = new Float64Array(this.items.length * 2);
    for (let i = 0; i < this.length; i++) bigger[i] = this.items[(this.head + i) % this.items.length];
    this.items = bigger;
    this.head = 0;
  }
}

interface AccountWindow {
  recent: TimestampRing;
  stats: RateLimitStats;
}

export class RateLimiter {
  private readonly windows = new Map<string, AccountWindow>();

  constructor(private readonly clock: () => number = () => performance.now()) {}

  /** Records the request and answers true when the account is within `limit` per second (0 = no limit). */
  admit(accountId: string, limit: number): boolean {
    let window = this.windows.get(accountId);
    if (!window) {
      window = { recent: new TimestampRing(), stats: { admitted: 0, rejected_429: 0, max_in_any_1s: 0 } };
      this.windows.set(accountId, window);
    }
    const now = this.clock();
    window.recent.dropUpTo(now - WINDOW_MS);
    if (limit > 0 && window.recent.length >= limit) {
      window.stats.rejected_429 += 1;
      return false;
    }
    window.recent.push(now);
    window.stats.admitted += 1;
    window.stats.max_in_any_1s = Math.max(window.stats.max_in_any_1s, window.recent.length);
    return true;
  }

  stats(): Record<string, RateLimitStats> {
    return Object.fromEntries([...this.windows].map(([id, w]) => [id, { ...w.stats }]));
  }

  clear(): void {
    this.windows.clear();
  }
}
