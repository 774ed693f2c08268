import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { DispatchSender } from './dispatch.sender';
import { DispatchStore } from './dispatch.store';
import { runEvery } from '../common/schedule';

const BATCH = 20;
/** Upstream attempts one instance runs at once from the worker. */
const MAX_IN_FLIGHT = 64;

/**
 * Retries queued dispatches and reclaims those stuck in `sending` past their lease (their process died). Every
 * instance runs one; `FOR UPDATE SKIP LOCKED` hands each due dispatch to exactly one of them. The dispatch row is
 * the job: no second record to keep in step (which a separate job queue would need in the same transaction).
 */
@Injectable()
export class DispatchWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(DispatchWorker.name);
  private running = false;
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly store: DispatchStore,
    private readonly sender: DispatchSender,
    private readonly scheduler: SchedulerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    runEvery(this.scheduler, 'reward-dispatch-worker', this.config.dispatch.pollMs, () => void this.tick());
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    await this.drain();
  }

  /**
   * One pass: claim due dispatches (up to the free in-flight slots) and start them; does not wait for the upstream
   * calls, so a slow or timing-out upstream does not stall the claiming. Returns how many were started.
   */
  async tick(): Promise<number> {
    if (this.running || this.stopped) return 0;
    this.running = true;
    let started = 0;
    try {
      for (;;) {
        const free = MAX_IN_FLIGHT - this.inFlight.size;
        if (free <= 0 || this.stopped) break;
        const claimed = await this.store.claimDue(Math.min(BATCH, free));
        const rewards = claimed.length ? await this.store.rewardsOf(claimed.map((r) => r.id)) : new Map();
        for (const row of claimed) {
          const attempt: Promise<void> = this.sender
            .run(row, rewards.get(row.id) ?? [])
            .then(
              () => undefined,
              (error: unknown) => this.logger.warn(`dispatch ${row.id}: ${String(error)}`),
            )
            .finally(() => this.inFlight.delete(attempt));
          this.inFlight.add(attempt);
        }
        started += claimed.length;
        if (claimed.length < BATCH) break;
      }
    } catch (error) {
      this.logger.warn(
        `dispatch worker pass failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    } finally {
      this.running = false;
    }
    return started;
  }

  /** Waits for the attempts this instance has started (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }
}
