import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import type { DispatchRow } from './dispatch.view';
import { RewardDispatchService } from './reward-dispatch.service';

const BATCH = 20;

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
  private current: Promise<void> = Promise.resolve();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
    private readonly dispatches: RewardDispatchService,
    private readonly scheduler: SchedulerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    const timer = setInterval(() => void this.tick(), this.config.dispatch.pollMs);
    timer.unref();
    this.scheduler.addInterval('reward-dispatch-worker', timer);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    await this.current;
  }

  /** One pass: claim due dispatches in batches until none are left. Returns how many were attempted. */
  async tick(): Promise<number> {
    if (this.running || this.stopped) return 0;
    this.running = true;
    let total = 0;
    const pass = (async () => {
      try {
        for (;;) {
          const claimed = await this.claim();
          if (claimed.length === 0 || this.stopped) break;
          total += claimed.length;
          await Promise.all(claimed.map((row) => this.dispatches.attempt(row)));
          if (claimed.length < BATCH) break;
        }
      } catch (error) {
        this.logger.warn(`dispatch worker pass failed: ${error instanceof Error ? error.message : String(error)}`);
      } finally {
        this.running = false;
      }
    })();
    this.current = pass;
    await pass;
    return total;
  }

  private async claim(): Promise<DispatchRow[]> {
    const [rows] = (await this.db.query(
      `UPDATE reward_dispatches d
          SET status = 'sending', attempts = d.attempts + 1, updated_at = now(),
              lease_until = now() + make_interval(secs => $1::float8 / 1000)
         FROM (SELECT id FROM reward_dispatches
                WHERE (status = 'queued' AND next_attempt_at <= now()) OR (status = 'sending' AND lease_until < now())
                ORDER BY coalesce(next_attempt_at, lease_until)
                LIMIT $2 FOR UPDATE SKIP LOCKED) due
        WHERE d.id = due.id
        RETURNING d.*`,
      [this.config.dispatch.leaseMs, BATCH],
    )) as [DispatchRow[], number];
    return rows;
  }
}
