import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Clock } from '../common/clock';
import { runEverySpread } from '../common/schedule';
import type { RetentionConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';

const DAY_MS = 24 * 3600_000;
/** After each batch the job rests at least 4× as long as it took: busy a fifth of the time at most. */
const REST_PER_BUSY = 4;
const MAX_REST_MS = 10_000;
/** The session advisory lock of a pass: one instance at a time (arbitrary, constant). */
const LOCK_ID = 7_240_153;

/**
 * An age limit: `purge(olderThan, limit)` deletes or redacts at most `limit` rows older than `olderThan` and returns
 * how many; it is called again until it returns less. `days` 0: kept forever. `purgeTenant`: the same table's rows of
 * a deleted tenant, a tenant step under the same name.
 */
export interface AgePurge {
  name: string;
  days: number;
  purge(olderThan: Date, limit: number): Promise<number>;
  purgeTenant?: TenantPurge['purge'];
}

/** A step of removing a deleted tenant's data, like an age purge; `final` steps (the tenant row) run last, once. */
export interface TenantPurge {
  name: string;
  purge(tenantId: string, limit: number): Promise<number>;
  final?: boolean;
}

/** Run in the transaction that marks a tenant deleted: each module ends what it holds live for it (keys, grants). */
export type OffboardHook = (tx: Sql, tenantId: string) => Promise<void>;

/** The one list of what the gateway deletes with age and when a tenant leaves; modules register, `RetentionJob` runs. */
@Injectable()
export class Retention {
  readonly ages: AgePurge[] = [];
  readonly tenantSteps: TenantPurge[] = [];
  readonly offboardHooks: OffboardHook[] = [];

  register(purge: AgePurge): void {
    this.ages.push(purge);
    if (purge.purgeTenant) this.registerTenantStep({ name: purge.name, purge: purge.purgeTenant });
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
 * Every `RETENTION_INTERVAL_MS` (the first at a random moment within it), under a session advisory lock: the data of
 * deleted tenants, then each age purge, in short batches with rests between them, so nothing long-running holds locks
 * or the vacuum horizon; a pass cut short is resumed by the next one.
 */
@Injectable()
export class RetentionJob implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(RetentionJob.name);
  private running: Promise<PassResult | null> | null = null;
  /** Aborted when the app stops: no new pass, no new batch, and a rest between batches ends at once. */
  private readonly stopping = new AbortController();

  constructor(
    @InjectConfig('retention') private readonly config: RetentionConfig,
    private readonly retention: Retention,
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly scheduler: SchedulerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    runEverySpread(this.scheduler, 'retention', this.config.intervalMs, () => this.nudge());
  }

  async onModuleDestroy(): Promise<void> {
    this.stopping.abort();
    await this.running?.catch(() => undefined);
  }

  /** Starts a pass unless one is running here. */
  nudge(): void {
    if (this.running || this.stopping.signal.aborted) return;
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

  private async purgeTenant(tenantId: string, count: (name: string, n: number) => void): Promise<void> {
    const steps = this.retention.tenantSteps;
    for (const step of steps.filter((s) => !s.final))
      count(step.name, await this.drain((limit) => step.purge(tenantId, limit)));
    if (this.stopping.signal.aborted) return;
    for (const step of steps.filter((s) => s.final)) count(step.name, await step.purge(tenantId, 1));
  }

  /** Batches until one comes back short (or the app stops); returns the rows removed. */
  private async drain(batch: (limit: number) => Promise<number>): Promise<number> {
    const limit = this.config.batchSize;
    let total = 0;
    while (!this.stopping.signal.aborted) {
      const started = performance.now();
      const n = await batch(limit);
      total += n;
      if (n < limit) break;
      const rest = Math.max(
        this.config.pauseMs,
        Math.min(MAX_REST_MS, (performance.now() - started) * REST_PER_BUSY),
      );
      if (rest > 0) await sleep(rest, undefined, { signal: this.stopping.signal }).catch(() => undefined);
    }
    return total;
  }
}
