import { HttpStatus, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { AppError } from '../common/app-error';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { RewardsApi } from '../token-vault/rewards-api.service';
import { AccessTokenProvider } from '../token-vault/access-token.provider';
import { VaultError } from '../token-vault/token-vault.errors';
import { MetricsService } from '../metrics/metrics.service';
import { toConnectionResponse } from '../connections/connections.service';

export type Health = 'healthy' | 'degraded' | 'broken' | 'idle';

/** Health from the connection row: what ops can act on. $1 is the idle threshold in ms. */
export const HEALTH_SQL = `CASE
    WHEN c.status = 'disconnected' THEN NULL
    WHEN c.status = 'needs_reauth' THEN 'broken'
    WHEN c.status = 'error' OR c.consecutive_failures > 0 OR c.last_probe_ok = false THEN 'degraded'
    WHEN coalesce(c.last_used_at, c.connected_at) < now() - make_interval(secs => $1::float8 / 1000) THEN 'idle'
    ELSE 'healthy' END`;

const URGENCY_SQL = `CASE c.status WHEN 'needs_reauth' THEN 0 WHEN 'error' THEN 1 WHEN 'active' THEN 2 ELSE 3 END`;

export interface ConnectionListQuery {
  status?: string;
  tenant?: string;
  environment?: string;
  health?: string;
  limit?: number;
  offset?: number;
}

/** Connection health for operators: listing by urgency, detail with events, probe and forced refresh. */
@Injectable()
export class OpsService implements OnApplicationBootstrap {
  private readonly logger = new Logger(OpsService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
    private readonly tokens: AccessTokenProvider,
    private readonly rewardsApi: RewardsApi,
    private readonly metrics: MetricsService,
  ) {}

  onApplicationBootstrap(): void {
    this.metrics.gauge('rg_connections', 'Connections by status and health.', ['status', 'health'], async (set) => {
      const rows = (await this.db.query(
        `SELECT c.status, coalesce(${HEALTH_SQL}, 'none') AS health, count(*)::int AS n FROM connections c GROUP BY 1, 2`,
        [this.config.ops.idleAfterMs],
      )) as { status: string; health: string; n: number }[];
      for (const r of rows) set({ status: r.status, health: r.health }, r.n);
    });
    this.metrics.gauge('rg_dispatches', 'Dispatches by status.', ['status'], async (set) => {
      const rows = (await this.db.query(`SELECT status, count(*)::int AS n FROM reward_dispatches GROUP BY status`)) as { status: string; n: number }[];
      for (const r of rows) set({ status: r.status }, r.n);
    });
    this.metrics.gauge('rg_rewards_pending_approval', 'Rewards whose order is held for approval upstream (served by a partial index).', [], async (set) => {
      const rows = (await this.db.query(`SELECT count(*)::int AS n FROM dispatch_rewards WHERE status = 'pending_approval'`)) as { n: number }[];
      set({}, rows[0]?.n ?? 0);
    });
    this.metrics.gauge('rg_app_credentials_invalid', '1 while the rewards service refuses the gateway’s app credentials for an environment.', ['environment'], async (set) => {
      const rows = (await this.db.query(`SELECT name, app_credentials_invalid_at IS NOT NULL AS invalid FROM rewards_environments`)) as { name: string; invalid: boolean }[];
      for (const r of rows) set({ environment: r.name }, r.invalid ? 1 : 0);
    });
  }

  async list(query: ConnectionListQuery) {
    const limit = query.limit ?? 50;
    const offset = query.offset ?? 0;
    const rows = (await this.db.query(
      `SELECT c.*, t.name AS tenant_name, ${HEALTH_SQL} AS health
         FROM connections c JOIN tenants t ON t.id = c.tenant_id
        WHERE ($2::text IS NULL AND c.status <> 'disconnected' OR c.status = $2)
          AND ($3::text IS NULL OR c.tenant_id = $3)
          AND ($4::text IS NULL OR c.environment = $4)
          AND ($5::text IS NULL OR ${HEALTH_SQL} = $5)
        ORDER BY ${URGENCY_SQL}, c.consecutive_failures DESC, c.last_error_at DESC NULLS LAST, c.tenant_id, c.id
        LIMIT $6 OFFSET $7`,
      [this.config.ops.idleAfterMs, query.status ?? null, query.tenant ?? null, query.environment ?? null, query.health ?? null, limit + 1, offset],
    )) as Record<string, unknown>[];
    const page = rows.slice(0, limit);
    const counts = await this.dispatchCounts(page.map((r) => r.id as string));
    return { connections: page.map((r) => view(r, counts.get(r.id as string))), next_offset: rows.length > limit ? offset + limit : null };
  }

  async detail(id: string) {
    const rows = (await this.db.query(
      `SELECT c.*, t.name AS tenant_name, ${HEALTH_SQL} AS health FROM connections c JOIN tenants t ON t.id = c.tenant_id WHERE c.id = $2`,
      [this.config.ops.idleAfterMs, id],
    )) as Record<string, unknown>[];
    if (!rows[0]) throw new VaultError(HttpStatus.NOT_FOUND, 'connection_not_found', `No connection ${id}.`);
    const events = (await this.db.query(`SELECT type, detail, at FROM connection_events WHERE connection_id = $1 ORDER BY id DESC LIMIT 50`, [id])) as {
      type: string;
      detail: unknown;
      at: Date;
    }[];
    const counts = await this.dispatchCounts([id]);
    return { ...view(rows[0], counts.get(id)), events: events.map((e) => ({ type: e.type, detail: e.detail, at: e.at.toISOString() })) };
  }

  /** Probes `GET /api/v2/organizations` with the connection's token and records the outcome. */
  async check(id: string) {
    await this.requireLive(id);
    let ok = false;
    let error: string | null = null;
    try {
      await this.rewardsApi.forConnection(id).probe();
      ok = true;
    } catch (e) {
      error = e instanceof AppError ? e.code : e instanceof Error ? e.message : String(e);
    }
    await this.db.query(`UPDATE connections SET last_probe_at = now(), last_probe_ok = $2, last_probe_error = $3, updated_at = now() WHERE id = $1`, [id, ok, error]);
    await this.db.query(`INSERT INTO connection_events (connection_id, type, detail) VALUES ($1, 'probe', $2)`, [id, { ok, error }]);
    return this.detail(id);
  }

  /** Forces a refresh through the lock (the same protocol every caller uses). */
  async refresh(id: string) {
    await this.requireLive(id);
    try {
      await this.tokens.forceRefresh(id);
    } catch (e) {
      if (!(e instanceof AppError)) throw e;
      // The outcome (needs_reauth, failure counters, events) is recorded on the connection; show it.
    }
    return this.detail(id);
  }

  /** Background probe: claims up to `batch` idle connections (one instance each, SKIP LOCKED) and probes them. */
  async probeIdle(batch = 10): Promise<number> {
    const [rows] = (await this.db.query(
      `UPDATE connections c SET last_probe_at = now()
        FROM (SELECT id FROM connections
               WHERE status IN ('active', 'error')
                 AND coalesce(last_used_at, connected_at) < now() - make_interval(secs => $1::float8 / 1000)
                 AND (last_probe_at IS NULL OR last_probe_at < now() - make_interval(secs => $1::float8 / 1000))
               ORDER BY last_probe_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED) due
       WHERE c.id = due.id RETURNING c.id`,
      [this.config.ops.idleAfterMs, batch],
    )) as [{ id: string }[], number];
    for (const { id } of rows) await this.check(id).catch((e: unknown) => this.logger.warn(`probe of ${id} failed: ${String(e)}`));
    return rows.length;
  }

  private async requireLive(id: string): Promise<void> {
    const rows = (await this.db.query(`SELECT status FROM connections WHERE id = $1`, [id])) as { status: string }[];
    if (!rows[0]) throw new VaultError(HttpStatus.NOT_FOUND, 'connection_not_found', `No connection ${id}.`);
    if (rows[0].status === 'disconnected') throw new VaultError(HttpStatus.CONFLICT, 'connection_not_active', 'The connection is disconnected.');
  }

  private async dispatchCounts(ids: string[]): Promise<Map<string, Record<string, number>>> {
    const map = new Map<string, Record<string, number>>();
    if (ids.length === 0) return map;
    const rows = (await this.db.query(
      `SELECT connection_id, status, count(*)::int AS n FROM reward_dispatches
        WHERE connection_id = ANY($1::uuid[]) AND created_at > now() - interval '24 hours' GROUP BY 1, 2`,
      [ids],
    )) as { connection_id: string; status: string; n: number }[];
    for (const r of rows) {
      const entry = map.get(r.connection_id) ?? {};
      entry[r.status] = r.n;
      map.set(r.connection_id, entry);
    }
    return map;
  }
}

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

function view(r: Record<string, unknown>, counts: Record<string, number> = {}) {
  return {
    ...toConnectionResponse(r),
    tenant_name: r.tenant_name as string,
    health: r.health as Health | null,
    last_probe: r.last_probe_at ? { at: iso(r.last_probe_at), ok: r.last_probe_ok as boolean | null, error: (r.last_probe_error as string | null) ?? null } : null,
    dispatches_24h: { sent: counts.sent ?? 0, failed: counts.failed ?? 0, queued: (counts.queued ?? 0) + (counts.sending ?? 0) },
  };
}

export type ConnectionHealthView = ReturnType<typeof view>;
