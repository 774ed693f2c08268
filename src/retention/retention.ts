import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Clock } from '../common/clock';
import { runEvery } from '../common/schedule';
import type { RetentionConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';

const DAY_MS = 24 * 3600_000;
/**
 * After each batch the job rests at least this many times as long as the batch took (and RETENTION_PAUSE_MS): busy a
 * fifth of the time at most, so that a large purge leaves the database to the sends.
 */
const REST_PER_BUSY = 4;
/** The longest rest (a batch slowed by a stall of the process does not idle the job for minutes). */
const MAX_REST_MS = 10_000;
/** The session advisory lock of a pass: one instance at a time (arbitrary, constant). */
const LOCK_ID = 7_240_153;

/**
 * One table's (or one kind of row's) age limit: `purge(olderThan, limit)` deletes or redacts at most `limit` rows
 * older than `olderThan` and returns how many; it is called again until it returns less. `days` 0: kept forever.
 * Each purge is a statement of the table's own store.
 */
export interface AgePurge {
  name: string;
  days: number;
  purge(olderThan: Date, limit: number): Promise<number>;
}

/**
 * One step of removing a deleted tenant's data: at most `limit` rows of the tenant, returning how many (called again
 * until it returns less). `final` steps run once every other step found nothing left (the tenant row itself).
 */
export interface TenantPurge {
  name: string;
  purge(tenantId: string, limit: number): Promise<number>;
  final?: boolean;
}

/** Run in the transaction that marks a tenant deleted: each module ends what it holds live for it (keys, grants). */
export type OffboardHook = (tx: Sql, tenantId: string) => Promise<void>;

/**
 * The one list of what the gateway deletes with age and when a tenant leaves. Modules register their purges (from
 * their module's constructor); `RetentionJob` runs them.
 */
@Injectable()
export class Retention {
  readonly ages: AgePurge[] = [];
  readonly tenantSteps: TenantPurge[] = [];
  readonly offboardHooks: OffboardHook[] = [];

  register(purge: AgePurge): void {
    this.ages.push(purge);
  }

  registerTenantStep(step: TenantPurge): void {
    this.tenantSteps.push(step);
  }

  onOffboard(hook: OffboardHook): void {
    this.offboardHooks.push(hook);
  }
}

export type PassResult = Record<string, number>;

/**
 * The retention job, on every instance every `RETENTION_INTERVAL_MS` (the first at a random moment within it): under a
 * session advisory lock (one instance at a time; a process that dies releases it), it removes the data of deleted
 * tenants, then runs each age purge. Every batch is its own short statement of at most `RETENTION_BATCH_SIZE` rows,
 * followed by a pause of `RETENTION_PAUSE_MS` and at least four times as long as the batch took: nothing long-running
 * holds locks or the vacuum horizon, and a pass cut short (a restart) is simply resumed by the next one. Cutoffs are
 * read from the injected clock.
 */
@Injectable()
export class RetentionJob implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(RetentionJob.name);
  private running: Promise<PassResult | null> | null = null;
  private stopped = false;
  /** Ends the rest under way (shutdown does not wait for it). */
  private wake: (() => void) | null = null;

  constructor(
    @InjectConfig('retention') private readonly config: RetentionConfig,
    private readonly retention: Retention,
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly scheduler: SchedulerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    const start = setTimeout(
      () => runEvery(this.scheduler, 'retention', this.config.intervalMs, () => this.nudge()),
      Math.random() * this.config.intervalMs,
    );
    start.unref();
    this.scheduler.addTimeout('retention-start', start);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running?.catch(() => undefined);
  }

  /** Starts a pass unless one is running here (a tenant was just deleted, or the timer fired). */
  nudge(): void {
    if (this.running || this.stopped) return;
    void this.run().catch((e: Error) => this.logger.warn(`retention pass failed: ${e.message}`));
  }

  /** One pass (waits for the one running here); null when another instance holds the lock. */
  run(): Promise<PassResult | null> {
    this.running ??= this.pass().finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<PassResult | null> {
    const client = await this.db.main.connect();
    let locked = false;
    try {
      locked = (await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock($1) AS ok`, [LOCK_ID]))
        .rows[0].ok;
      if (!locked) return null;
      const result: PassResult = {};
      const count = (name: string, n: number) => {
        if (n) result[name] = (result[name] ?? 0) + n;
      };
      const { rows: deleted } = await client.query<{ id: string }>(
        `SELECT id FROM tenants WHERE deleted_at IS NOT NULL ORDER BY deleted_at`,
      );
      for (const { id } of deleted) await this.purgeTenant(id, count);
      const now = this.clock.now();
      for (const age of this.retention.ages) {
        if (age.days <= 0) continue;
        const olderThan = new Date(now - age.days * DAY_MS);
        count(age.name, await this.drain((limit) => age.purge(olderThan, limit)));
      }
      if (Object.keys(result).length) this.logger.log(result, 'retention: removed');
      return result;
    } finally {
      if (locked) await client.query(`SELECT pg_advisory_unlock($1)`, [LOCK_ID]).catch(() => undefined);
      client.release();
    }
  }

  /** Every step of a deleted tenant until nothing of it is left, then the final ones (the tenant row). */
  private async purgeTenant(tenantId: string, count: (name: string, n: number) => void): Promise<void> {
    const steps = this.retention.tenantSteps;
    for (const step of steps.filter((s) => !s.final))
      count(step.name, await this.drain((limit) => step.purge(tenantId, limit)));
    if (this.stopped) return;
    for (const step of steps.filter((s) => s.final)) count(step.name, await step.purge(tenantId, 1));
  }

  /** Batches until one comes back short (or the app stops), pausing between them. Returns the rows removed. */
  private async drain(batch: (limit: number) => Promise<number>): Promise<number> {
    const limit = this.config.batchSize;
    let total = 0;
    while (!this.stopped) {
      const started = performance.now();
      const n = await batch(limit);
      total += n;
      if (n < limit) break;
      const rest = Math.max(
        this.config.pauseMs,
        Math.min(MAX_REST_MS, (performance.now() - started) * REST_PER_BUSY),
      );
      if (rest > 0)
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, rest);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      this.wake = null;
    }
    return total;
  }
}
