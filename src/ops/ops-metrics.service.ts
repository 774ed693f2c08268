import { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { Clock } from '../common/clock';
import type { MetricsService } from '../metrics/metrics.service';
import { OnePass, runEvery, withTimeout } from '../common/schedule';

export const OPS_METRICS_REFRESH_MS = 15_000;
export const OPS_METRICS_INTERVAL = 'ops-metrics-snapshot';

/** One count behind the gauges (`health`: of connections only). */
export interface GaugeCount {
  metric: 'connections' | 'dispatches' | 'pending_approval' | 'app_credentials_invalid';
  label: string;
  health: string;
  n: number;
}

/** Series exported at 0 too, so none vanishes: dispatches in flight, and every status and health a connection combines. */
const DISPATCH_STATUSES = ['sending', 'queued'];
const CONNECTION_SERIES = [
  ['active', 'healthy'],
  ['active', 'degraded'],
  ['active', 'idle'],
  ['error', 'degraded'],
  ['needs_reauth', 'broken'],
  ['disconnected', 'none'],
] as const;

/**
 * The ops gauges that need counts, served from a snapshot in memory (a scrape costs no query), refreshed by each
 * instance every `refreshMs`; `rg_metrics_snapshot_age_seconds` shows a refresh that keeps failing.
 */
export class OpsMetricsService {
  private readonly logger = new Logger(OpsMetricsService.name);
  private readonly createdAt: number;
  private snapshot: { counts: GaugeCount[]; at: number } | null = null;
  private last: Promise<void> = Promise.resolve();
  private readonly ticks = new OnePass();

  constructor(
    metrics: MetricsService,
    private readonly read: () => Promise<GaugeCount[]>,
    private readonly clock: Clock,
    readonly refreshMs = OPS_METRICS_REFRESH_MS,
  ) {
    this.createdAt = clock.now();
    metrics.gauge('rg_connections', 'Connections by status and health.', ['status', 'health'], (set) => {
      if (!this.snapshot) return;
      for (const [status, health] of CONNECTION_SERIES) set({ status, health }, 0);
      for (const r of this.counts('connections')) set({ status: r.label, health: r.health }, r.n);
    });
    metrics.gauge('rg_dispatches', 'Dispatches in flight (queued, sending) by status.', ['status'], (set) => {
      if (!this.snapshot) return;
      for (const status of DISPATCH_STATUSES) set({ status }, 0);
      for (const r of this.counts('dispatches')) set({ status: r.label }, r.n);
    });
    metrics.gauge(
      'rg_rewards_pending_approval',
      'Rewards whose order is held for approval upstream.',
      [],
      (set) => {
        set({}, this.counts('pending_approval')[0]?.n ?? 0);
      },
    );
    metrics.gauge(
      'rg_app_credentials_invalid',
      '1 while the rewards service refuses the gateway’s app credentials for an environment.',
      ['environment'],
      (set) => {
        for (const r of this.counts('app_credentials_invalid')) set({ environment: r.label }, r.n);
      },
    );
    metrics.gauge(
      'rg_metrics_snapshot_age_seconds',
      `Age of the snapshot this instance serves rg_connections, rg_dispatches, rg_rewards_pending_approval and rg_app_credentials_invalid from (refreshed every ${refreshMs / 1000} s).`,
      [],
      (set) => {
        set({}, (this.clock.now() - (this.snapshot?.at ?? this.createdAt)) / 1000);
      },
    );
  }

  /** Reads now, after any read under way (so a snapshot is never replaced by an older one). */
  refresh(): Promise<void> {
    this.last = this.last
      .catch(() => undefined)
      .then(async () => {
        this.snapshot = { counts: await this.read(), at: this.clock.now() };
      });
    return this.last;
  }

  /** One refresh now, then every `refreshMs` (skipped while one is still running). */
  start(scheduler: SchedulerRegistry): void {
    this.tick();
    runEvery(scheduler, OPS_METRICS_INTERVAL, this.refreshMs, () => this.tick());
  }

  /** Stops the timer and waits (5 s at most) for a refresh under way: the pool closes after this. */
  async stop(scheduler: SchedulerRegistry): Promise<void> {
    if (scheduler.doesExist('interval', OPS_METRICS_INTERVAL)) scheduler.deleteInterval(OPS_METRICS_INTERVAL);
    await withTimeout(this.ticks.stop(), 5_000, 'refresh under way').catch(() => undefined);
  }

  private counts(metric: GaugeCount['metric']): GaugeCount[] {
    return this.snapshot?.counts.filter((c) => c.metric === metric) ?? [];
  }

  private tick(): void {
    this.ticks
      .run(() => this.refresh().then(() => 1))
      .catch((e: unknown) =>
        this.logger.warn(`metrics snapshot refresh failed: ${e instanceof Error ? e.message : String(e)}`),
      );
  }
}
