import { Injectable, Logger } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { Clock } from '../common/clock';
import { SingleFlight } from '../common/single-flight';
import { TtlCache } from '../common/ttl-cache';
import { NotificationsService } from '../database/notifications.service';
import { MetricsService } from '../metrics/metrics.service';
import { Database } from '../database/database';
import { FieldsUnavailableError } from './fields-cache.errors';
import type { UpstreamField } from '../rewards-api/connection-client';
import { RewardsApiError } from '../rewards-api/rewards-api.errors';
import { RewardsApi } from '../token-vault/rewards-api.service';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

/** A custom field of the rewards account, as cached and as the fields route lists it. */
export class FieldView {
  @ApiProperty() id: string;
  @ApiProperty() label: string;
  @ApiProperty({ example: 'Dropdown' }) data_type: string;
  @ApiProperty({ type: [String], nullable: true }) options: string[] | null;
  @ApiProperty() required: boolean;
}
export type Field = FieldView;

export interface FieldsSnapshot {
  fields: Field[];
  fetchedAt: Date;
  /** An older copy, served while the upstream cannot be reached. */
  stale: boolean;
}

const MEMORY_TTL_MS = 30_000;
/** The shared copy (the `fields_cache` row) is served this long without asking the upstream. */
export const SHARED_TTL_MS = 5 * 60_000;
const STALE_MEMORY_TTL_MS = 5_000;
const FORCED_RELOAD_INTERVAL_MS = 30_000;

export function isFresh(fetchedAt: Date, now: number): boolean {
  return fetchedAt.getTime() + SHARED_TTL_MS > now;
}

function normalise(raw: UpstreamField[]): Field[] {
  return raw.map((f) => ({
    id: String(f.id),
    label: String(f.label),
    data_type: String(f.data_type),
    options: Array.isArray(f.data?.options) ? f.data.options.map(String) : null,
    required: f.required === true,
  }));
}

/**
 * Per-connection cache of the upstream `fields`: memory (30 s) → the shared `fields_cache` row (5 min) →
 * `GET /api/v2/fields`, single-flight. When the upstream is down, the last copy is served, flagged stale.
 */
@Injectable()
export class FieldsCacheService {
  private readonly logger = new Logger(FieldsCacheService.name);
  private readonly memory: TtlCache<FieldsSnapshot>;
  private readonly loading = new SingleFlight<FieldsSnapshot>();

  constructor(
    private readonly db: Database,
    private readonly rewardsApi: RewardsApi,
    private readonly metrics: MetricsService,
    notifications: NotificationsService,
    private readonly clock: Clock,
  ) {
    this.memory = new TtlCache(clock, 10_000);
    notifications.evictFrom(this.memory, 'connection', ({ id }) => id);
  }

  async get(connectionId: string): Promise<FieldsSnapshot> {
    const cached = this.memory.get(connectionId);
    if (cached) {
      this.metrics.fieldsCache.inc({ event: 'hit' });
      return cached.value;
    }
    this.metrics.fieldsCache.inc({ event: 'miss' });
    return this.loading.run(connectionId, () => this.load(connectionId, false));
  }

  /** One reload from the upstream, unless another caller (any instance) did one within the last 30 s. */
  async forceReload(connectionId: string): Promise<FieldsSnapshot> {
    const { rows } = await this.db.main.query(
      `UPDATE fields_cache SET forced_reload_at = now()
        WHERE connection_id = $1 AND (forced_reload_at IS NULL OR forced_reload_at < now() - make_interval(secs => $2::float8 / 1000))
        RETURNING connection_id`,
      [connectionId, FORCED_RELOAD_INTERVAL_MS],
    );
    if (rows.length === 0) return this.get(connectionId);
    this.metrics.fieldsCache.inc({ event: 'reload' });
    this.memory.delete(connectionId);
    return this.loading.run(connectionId, () => this.load(connectionId, true));
  }

  /** Drops this process's copy only; the shared row stays. */
  evictMemory(connectionId: string): void {
    this.memory.delete(connectionId);
  }

  /** Retention: deletes up to `limit` copies fetched before `olderThan` (reloaded on next use). */
  purgeStale(olderThan: Date, limit: number): Promise<number> {
    const text = batchDelete.matching('fields_cache', 'connection_id', 'fetched_at < $1');
    return purgeBatch(this.db.main, text, olderThan, limit);
  }

  async purge(connectionId: string): Promise<void> {
    this.memory.delete(connectionId);
    await this.db.main.query(`DELETE FROM fields_cache WHERE connection_id = $1`, [connectionId]);
  }

  private async load(connectionId: string, skipShared: boolean): Promise<FieldsSnapshot> {
    const { rows } = await this.db.main.query<{
      fields: Field[];
      fetched_at: Date;
    }>(`SELECT fields, fetched_at FROM fields_cache WHERE connection_id = $1`, [connectionId]);
    const shared = rows[0] ? { fields: rows[0].fields, fetchedAt: rows[0].fetched_at, stale: false } : null;
    if (shared && !skipShared && isFresh(shared.fetchedAt, this.clock.now()))
      return this.remember(connectionId, shared);
    try {
      const fields = normalise(await this.rewardsApi.forConnection(connectionId).listFields());
      const fetchedAt = new Date(this.clock.now());
      await this.db.main.query(
        `INSERT INTO fields_cache (connection_id, fields, fetched_at) VALUES ($1, $2, $3)
         ON CONFLICT (connection_id) DO UPDATE SET fields = EXCLUDED.fields, fetched_at = EXCLUDED.fetched_at`,
        [connectionId, JSON.stringify(fields), fetchedAt],
      );
      return this.remember(connectionId, { fields, fetchedAt, stale: false });
    } catch (error) {
      if (error instanceof RewardsApiError && error.kind === 'transient') {
        this.logger.warn(
          { connectionId, status: error.status },
          'fields unavailable upstream; serving the cached copy',
        );
        if (shared) return this.remember(connectionId, { ...shared, stale: true }, STALE_MEMORY_TTL_MS);
        throw new FieldsUnavailableError();
      }
      throw error;
    }
  }

  private remember(connectionId: string, snapshot: FieldsSnapshot, ttl = MEMORY_TTL_MS): FieldsSnapshot {
    this.memory.set(connectionId, snapshot, ttl);
    return snapshot;
  }
}
