import type { NextFunction, Request, Response } from 'express';
import { restoreSnapshot, serializeSnapshot } from './sandbox.snapshot';
import type { SandboxState } from './sandbox.state';

/** Where a sandbox keeps its state between runs (the gateway: one row in Postgres, sandbox.store.ts). */
export interface SandboxPersistence {
  /** The stored snapshot as parsed JSON, or null when there is none yet. */
  load(): Promise<unknown>;
  /** Replaces the stored snapshot with this JSON text (see sandbox.snapshot.ts). */
  save(snapshotJson: string): Promise<void>;
}

export interface SandboxLog {
  log(message: string): void;
  error(message: string): void;
}

/** Writes start at least this far apart; more when one takes long (at most ~1/5 of the time spent saving). */
const MIN_SAVE_INTERVAL_MS = 1000;
/** Changes arriving together (one connect is several requests) are written together. */
const BATCH_DELAY_MS = 200;

/**
 * Keeps a SandboxState in a SandboxPersistence: loads it before the first request is let through, saves the whole
 * state after changes (debounced: at most one write a second, only when something changed), and once more on
 * close. Requests arriving while it loads wait; those arriving once closing started get 503 (a change after the
 * last write would be lost). A write that fails is retried on the next round; a load that fails leaves the sandbox
 * in memory only (nothing is written, so the stored state is not overwritten with an empty one).
 */
export class SandboxPersister {
  readonly ready: Promise<void>;
  private loaded = false;
  private closing = false;
  private disabled = false;
  private dirty = false;
  private timer?: NodeJS.Timeout;
  private saving?: Promise<void>;
  private lastStart = 0;
  private interval = MIN_SAVE_INTERVAL_MS;
  private failing = false;
  private closed?: Promise<void>;
  /** Writes done (for tests and logs). */
  saves = 0;

  constructor(
    private readonly state: SandboxState,
    private readonly persistence: SandboxPersistence,
    private readonly logger: SandboxLog,
  ) {
    this.ready = this.load();
  }

  private async load(): Promise<void> {
    try {
      const stored = await this.persistence.load();
      if (stored) {
        restoreSnapshot(this.state, stored);
        const sizes = this.state.sizes();
        this.logger.log(
          `Sandbox state restored: ${sizes.accounts} accounts, ${sizes.grants} grants, ${sizes.orders} orders`,
        );
      }
    } catch (error) {
      this.disabled = true;
      this.logger.error(
        `Sandbox state could not be loaded; the sandbox runs in memory only and saves nothing: ${message(error)}`,
      );
    } finally {
      this.loaded = true;
    }
  }

  /** Express middleware, first in the sandbox: holds requests until loaded, refuses them once closing. */
  gate() {
    return (_req: Request, res: Response, next: NextFunction): void => {
      if (this.closing) {
        res.setHeader('Retry-After', '1');
        res.status(503).json({ errors: { message: 'The sandbox is shutting down', payload: {} } });
        return;
      }
      if (this.loaded) return next();
      this.ready.then(() => (this.closing ? this.gate()(_req, res, next) : next()), next);
    };
  }

  /**
   * Express middleware: a request that may change the state (any but GET/HEAD, or under /oauth) marks it dirty as it
   * arrives and again once answered (a handler may run late: injected latency).
   */
  tracker() {
    return (req: Request, res: Response, next: NextFunction): void => {
      if ((req.method !== 'GET' && req.method !== 'HEAD') || req.path.startsWith('/oauth/')) {
        this.markDirty();
        res.once('close', () => this.markDirty());
      }
      next();
    };
  }

  /**
   * A change made outside any request (a reward delivered on a timer) that is not worth a write of its own: it goes
   * with the next write, or the last one on close. Lost in a crash; the sandbox then delivers that reward again.
   */
  markChanged(): void {
    this.dirty = true;
  }

  markDirty(): void {
    this.dirty = true;
    if (!this.timer && !this.saving && !this.closing && !this.disabled && this.loaded) this.schedule();
  }

  private schedule(minWait = BATCH_DELAY_MS): void {
    const wait = Math.max(minWait, this.lastStart + this.interval - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // Timers run on the monotonic clock, the spacing on Date.now(): should a timer fire early by the latter (CI saw
      // a write start 974 ms after the one before), it waits for the rest of the interval.
      if (Date.now() < this.lastStart + this.interval) return this.schedule(0);
      void this.flush();
    }, wait);
    this.timer.unref();
  }

  /** Writes the state now if it changed (after any write under way). */
  async flush(): Promise<void> {
    while (this.saving) await this.saving;
    if (!this.dirty || this.disabled) return;
    this.dirty = false;
    const started = Date.now();
    const snapshot = serializeSnapshot(this.state);
    // Writes start (the store is called) at least the interval apart: counted from here, after the snapshot is taken.
    this.lastStart = Date.now();
    this.saving = (async () => {
      try {
        await this.persistence.save(snapshot);
        this.saves++;
        if (this.failing) this.logger.log('Sandbox state saved again');
        this.failing = false;
      } catch (error) {
        this.dirty = true;
        if (!this.failing)
          this.logger.error(`Sandbox state could not be saved (retrying): ${message(error)}`);
        this.failing = true;
      } finally {
        this.interval = Math.max(MIN_SAVE_INTERVAL_MS, 5 * (Date.now() - started));
        this.saving = undefined;
      }
    })();
    await this.saving;
    if (this.dirty && !this.timer && !this.closing) this.schedule();
  }

  /** Stops taking requests and writes what changed since the last write. Idempotent. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.closing = true;
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      await this.ready;
      await this.flush();
    })();
    return this.closed;
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
