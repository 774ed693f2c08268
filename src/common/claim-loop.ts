import { Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { runEvery } from './schedule';

/** One claim of due work: how many items were started, and whether to claim again in the same pass. */
export interface Claimed {
  started: number;
  more: boolean;
}

/** Items in flight on this instance per key (a connection, an endpoint): what a worker's claims skip or count. */
export class InFlightCounts extends Map<string, number> {
  /** Counts one more item for `key`; returns the release to call once, when it settles. */
  hold(key: string): () => void {
    this.set(key, (this.get(key) ?? 0) + 1);
    return () => {
      const left = (this.get(key) ?? 1) - 1;
      if (left > 0) this.set(key, left);
      else this.delete(key);
    };
  }

  /** The keys with at least `limit` items in flight. */
  keysAtLeast(limit: number): string[] {
    return [...this].filter(([, n]) => n >= limit).map(([key]) => key);
  }
}

/**
 * A background worker's claim-and-start loop (the dispatch worker, the tenant-webhook sender): a pass every `pollMs`
 * (registered with @nestjs/schedule as `name`), one pass at a time on this instance. A pass claims due work up to the
 * free slots (`claim(free)`, which starts each item with `track`) and does not wait for it, so a slow upstream never
 * stalls claiming. `nudge()` asks for a pass now (a pass under way goes round again), `drain()` waits for what was
 * started, and the loop stops with the module.
 */
export abstract class LoopWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private running = false;
  private again = false;
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();
  protected readonly logger = new Logger(this.constructor.name);

  protected constructor(
    private readonly scheduler: SchedulerRegistry,
    private readonly name: string,
    private readonly pollMs: number,
    private readonly what: string,
    private readonly capacity: number,
  ) {}

  /** Claims due work (at most `free` items) and starts each with `track`. */
  protected abstract claim(free: number): Promise<Claimed>;

  /** Runs at the end of every pass (gauges, purges); its errors end the pass like a claim's. */
  protected async afterPass(): Promise<void> {}

  onApplicationBootstrap(): void {
    runEvery(this.scheduler, this.name, this.pollMs, () => void this.tick());
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    await this.drain();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Work became due here: claim now rather than at the next poll. */
  nudge(): void {
    if (this.running) this.again = true;
    else void this.tick();
  }

  /** One pass; returns how many items it started. */
  async tick(): Promise<number> {
    if (this.running || this.stopped) return 0;
    this.running = true;
    let started = 0;
    try {
      do {
        this.again = false;
        for (;;) {
          const free = this.capacity - this.inFlight.size;
          if (free <= 0 || this.stopped) break;
          const claimed = await this.claim(free);
          started += claimed.started;
          if (!claimed.more) break;
        }
      } while (this.again && !this.stopped);
      await this.afterPass();
    } catch (error) {
      this.logger.warn(`${this.what} pass failed: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      this.running = false;
    }
    return started;
  }

  /** Starts tracking one item's work; `done` runs when it settles (its failure is logged, never thrown). */
  protected track(work: Promise<unknown>, label: string, done: () => void = () => undefined): void {
    const item: Promise<void> = work
      .then(
        () => undefined,
        (error: unknown) =>
          this.logger.warn(`${label}: ${error instanceof Error ? error.message : String(error)}`),
      )
      .finally(() => {
        this.inFlight.delete(item);
        done();
      });
    this.inFlight.add(item);
  }

  /** Waits for the work this instance has started (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }
}
