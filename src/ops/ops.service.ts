import { HttpStatus, Injectable, Logger } from '@nestjs/common';
import { AuditLog } from '../audit/audit-log.service';
import { AppError, ValidationFailedError } from '../common/app-error';
import { Clock } from '../common/clock';
import type { OpsConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { AccessTokenProvider } from '../token-vault/access-token.provider';
import { VaultError } from '../token-vault/token-vault.errors';
import { ConnectionStateStore } from '../connections/connection-state.store';
import { Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import { toConnectionResponse } from '../connections/connections.service';
import { ConnectionProbe } from '../connections/connection-probe.service';
import { type GaugeCount, OpsMetricsService } from './ops-metrics.service';
import type { ConnectionListQueryDto } from './ops.controller';
import { rootSpan } from '../common/tracing';
import { invalidCursor } from '../common/page-query.dto';

export const CONNECTION_STATUSES = ['active', 'needs_reauth', 'error', 'disconnected'] as const;
export const CONNECTION_HEALTHS = ['healthy', 'degraded', 'broken', 'idle'] as const;
export type Health = (typeof CONNECTION_HEALTHS)[number];

/** Health from the connection row: what ops can act on. $1 is the idle threshold in ms. */
export const HEALTH_SQL = `CASE
    WHEN c.status = 'disconnected' THEN NULL
    WHEN c.status = 'needs_reauth' THEN 'broken'
    WHEN c.status = 'error' OR c.consecutive_failures > 0 OR c.last_probe_ok = false THEN 'degraded'
    WHEN coalesce(c.last_used_at, c.connected_at) < now() - make_interval(secs => $1::float8 / 1000) THEN 'idle'
    ELSE 'healthy' END`;

/**
 * The ops list's order, most urgent first (status rank, most failures, latest error, tenant, id), as ascending
 * never-NULL keys — exactly the expressions of `connections_ops_urgency_idx`, so a page is an index range scan and
 * the cursor a row comparison on them.
 */
const URGENCY_SQL = `(CASE c.status WHEN 'needs_reauth' THEN 0 WHEN 'error' THEN 1 WHEN 'active' THEN 2 ELSE 3 END)`;
/** `last_error_at DESC NULLS LAST` as an ascending key. */
const ERROR_KEY_SQL = `coalesce(extract(epoch FROM timestamptz 'epoch' - c.last_error_at), 'Infinity')`;
const ORDER_KEYS_SQL = `${URGENCY_SQL}, (-c.consecutive_failures), ${ERROR_KEY_SQL}, c.tenant_id, c.id`;
const URGENCY: Record<string, number> = { needs_reauth: 0, error: 1, active: 2, disconnected: 3 };
/** The columns a list row needs (not `c.*`: up to 201 rows a page); test/ops.e2e-spec.ts compares with the detail. */
const LIST_COLUMNS_SQL =
  `id tenant_id environment status scopes connected_at disconnected_at last_refreshed_at
  access_expires_at last_used_at last_error_code last_error_message last_error_at consecutive_failures refresh_count
  last_probe_at last_probe_ok last_probe_error organization_id organization_name`
    .split(/\s+/)
    .map((column) => `c.${column}`)
    .join(', ');
const DISPATCH_COUNTS_SQL = `count(*) FILTER (WHERE status = 'sent')::int AS sent, count(*) FILTER (WHERE status = 'failed')::int AS failed,
                count(*) FILTER (WHERE status IN ('queued', 'sending'))::int AS queued`;

export interface ConnectionEvent {
  connection_id: string;
  type: string;
  detail: unknown;
  at: Date;
}

/** Where a page ends: the order keys of its last row, and how many rows come before the next page. */
interface ListCursor {
  rank: number;
  negFailures: number;
  errorKey: string;
  tenantId: string;
  id: string;
  position: number;
}

const CURSOR_VERSION = 1;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ERROR_KEY = /^(-?\d{1,15}(\.\d{1,6})?|Infinity)$/;

/**
 * Opaque to clients: base64url of a JSON array, the order keys of the page's last row and the position after it; only a
 * position in the order, so any valid one is harmless.
 */
function encodeListCursor(last: Record<string, unknown>, position: number): string {
  const keys = [
    last.order_rank,
    -(last.consecutive_failures as number),
    last.order_error_key,
    last.tenant_id,
    last.id,
  ];
  return Buffer.from(JSON.stringify([CURSOR_VERSION, ...keys, position])).toString('base64url');
}

function decodeListCursor(cursor: string): ListCursor {
  let v: unknown = null;
  try {
    v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    // not JSON: refused below
  }
  const int = (x: unknown, min: number, max: number) =>
    Number.isSafeInteger(x) && (x as number) >= min && (x as number) <= max;
  if (
    !Array.isArray(v) ||
    v.length !== 7 ||
    v[0] !== CURSOR_VERSION ||
    !int(v[1], 0, 3) ||
    !int(v[2], -2_147_483_647, 2_147_483_647) ||
    typeof v[3] !== 'string' ||
    !ERROR_KEY.test(v[3]) ||
    typeof v[4] !== 'string' ||
    v[4].length > 63 ||
    typeof v[5] !== 'string' ||
    !UUID.test(v[5]) ||
    !int(v[6], 0, Number.MAX_SAFE_INTEGER)
  )
    throw invalidCursor();
  return { rank: v[1], negFailures: v[2], errorKey: v[3], tenantId: v[4], id: v[5], position: v[6] };
}

@Injectable()
export class OpsService {
  private readonly logger = new Logger(OpsService.name);
  private snapshot?: OpsMetricsService;

  constructor(
    @InjectConfig('ops') private readonly config: OpsConfig,
    private readonly db: Database,
    private readonly tokens: AccessTokenProvider,
    private readonly probes: ConnectionProbe,
    private readonly metrics: MetricsService,
    private readonly connectionState: ConnectionStateStore,
    private readonly audit: AuditLog,
    private readonly clock: Clock,
  ) {}

  /** The count gauges, served from a snapshot (OpsScheduler refreshes it); created on first use. */
  get gauges(): OpsMetricsService {
    return (this.snapshot ??= new OpsMetricsService(this.metrics, () => this.readGaugeCounts(), this.clock));
  }

  /**
   * Every count behind the gauges in one statement; dispatches and rewards from partial indexes, so they cost what is
   * in flight, not history. Runs in the background, never on a scrape.
   */
  async readGaugeCounts(): Promise<GaugeCount[]> {
    const { rows } = await this.db.main.query<GaugeCount>(
      `SELECT 'connections' AS metric, c.status AS label, coalesce(${HEALTH_SQL}, 'none') AS health, count(*)::int AS n
         FROM connections c GROUP BY 2, 3
       UNION ALL
       SELECT 'dispatches', 'queued', NULL, count(*)::int FROM reward_dispatches WHERE status = 'queued'
       UNION ALL
       SELECT 'dispatches', 'sending', NULL, count(*)::int FROM reward_dispatches WHERE status = 'sending'
       UNION ALL
       SELECT 'pending_approval', NULL, NULL, count(*)::int FROM dispatch_rewards WHERE status = 'pending_approval'
       UNION ALL
       SELECT 'app_credentials_invalid', name, NULL, (app_credentials_invalid_at IS NOT NULL)::int FROM rewards_environments`,
      [this.config.idleAfterMs],
    );
    return rows;
  }

  /** Every connection's health, most urgent first; `cursor` pages (keyset), `offset` costs the entries it skips. */
  async list(query: ConnectionListQueryDto) {
    const limit = query.limit ?? 50;
    const after = query.cursor !== undefined ? decodeListCursor(query.cursor) : null;
    if (after && query.offset) {
      throw new ValidationFailedError(
        [{ field: 'offset', reason: 'offset cannot be combined with cursor' }],
        'The query is invalid; see details.',
      );
    }
    const offset = after ? 0 : (query.offset ?? 0);
    const params: unknown[] = [this.config.idleAfterMs];
    const param = (value: unknown) => `$${params.push(value)}`;
    // On the index's leading key (the rank) where possible, so the scan starts and stops inside the index.
    const where = query.status
      ? [`${URGENCY_SQL} = ${param(URGENCY[query.status] ?? -1)}`, `c.status = ${param(query.status)}`]
      : [`${URGENCY_SQL} < ${URGENCY.disconnected}`, `c.status <> 'disconnected'`];
    if (query.tenant !== undefined) where.push(`c.tenant_id = ${param(query.tenant)}`);
    // A deleted tenant's connections (disconnected, removed in the background) are listed no more.
    where.push(`c.tenant_id <> ALL(ARRAY(SELECT id FROM tenants WHERE deleted_at IS NOT NULL))`);
    if (query.environment !== undefined) where.push(`c.environment = ${param(query.environment)}`);
    if (query.health !== undefined) where.push(`${HEALTH_SQL} = ${param(query.health)}`);
    if (after) {
      where.push(
        `(${ORDER_KEYS_SQL}) > (${param(after.rank)}::int, ${param(after.negFailures)}::int, ${param(after.errorKey)}::numeric, ${param(after.tenantId)}::text, ${param(after.id)}::uuid)`,
      );
    }
    // The page from the index, then for its rows only the tenant names and dispatch counts.
    const { rows } = await this.db.main.query<Record<string, unknown>>(
      `WITH page AS MATERIALIZED (
         SELECT ${LIST_COLUMNS_SQL}, ${URGENCY_SQL} AS order_rank, ${ERROR_KEY_SQL}::text AS order_error_key
           FROM connections c
          WHERE ${where.join(' AND ')}
          ORDER BY ${ORDER_KEYS_SQL}
          LIMIT ${param(limit + 1)} OFFSET ${param(offset)}),
       counts AS (
         SELECT connection_id, ${DISPATCH_COUNTS_SQL}
           FROM reward_dispatches
          WHERE connection_id = ANY(ARRAY(SELECT id FROM page)) AND created_at > now() - interval '24 hours'
          GROUP BY connection_id)
       SELECT ${LIST_COLUMNS_SQL}, c.order_rank, c.order_error_key, (SELECT name FROM tenants WHERE id = c.tenant_id) AS tenant_name, ${HEALTH_SQL} AS health,
              d.sent AS dispatches_sent, d.failed AS dispatches_failed, d.queued AS dispatches_queued
         FROM page c LEFT JOIN counts d ON d.connection_id = c.id
        ORDER BY ${ORDER_KEYS_SQL}`,
      params,
    );
    const page = rows.slice(0, limit);
    const more = rows.length > limit;
    const position = (after?.position ?? offset) + page.length;
    const last = page.at(-1);
    return {
      connections: page.map(view),
      next_cursor: more && last ? encodeListCursor(last, position) : null,
      next_offset: more ? position : null,
    };
  }

  async detail(id: string) {
    const { rows } = await this.db.main.query<Record<string, unknown>>(
      `SELECT c.*, t.name AS tenant_name, ${HEALTH_SQL} AS health,
              d.sent AS dispatches_sent, d.failed AS dispatches_failed, d.queued AS dispatches_queued
         FROM connections c JOIN tenants t ON t.id = c.tenant_id,
              LATERAL (SELECT ${DISPATCH_COUNTS_SQL} FROM reward_dispatches
                        WHERE connection_id = c.id AND created_at > now() - interval '24 hours') d
        WHERE c.id = $2`,
      [this.config.idleAfterMs, id],
    );
    if (!rows[0]) throw connectionNotFound(id);
    const events = await this.latestEvents([id], 50);
    return {
      ...view(rows[0]),
      events: events.map((e) => ({ type: e.type, detail: e.detail, at: e.at.toISOString() })),
    };
  }

  /** Each connection's latest events, newest first, from the index on (connection_id, at DESC): never a whole history. */
  async latestEvents(ids: string[], perConnection: number): Promise<ConnectionEvent[]> {
    const { rows } = await this.db.main.query<ConnectionEvent>(
      `SELECT ids.id AS connection_id, e.type, e.detail, e.at
         FROM unnest($1::uuid[]) AS ids(id)
         CROSS JOIN LATERAL (SELECT type, detail, at, id FROM connection_events
                              WHERE connection_id = ids.id ORDER BY at DESC, id DESC LIMIT $2) e
        ORDER BY e.at DESC, e.id DESC`,
      [ids, perConnection],
    );
    return rows;
  }

  async check(id: string) {
    await this.requireLive(id);
    await this.probes.probe(id);
    return this.detail(id);
  }

  async refresh(id: string) {
    await this.requireLive(id);
    try {
      await this.tokens.forceRefresh(id);
    } catch (e) {
      if (!(e instanceof AppError)) throw e; // the outcome is recorded on the connection: shown below
    }
    const detail = await this.detail(id);
    await this.audit.recordCommitted('connection.refreshed', {
      tenantId: detail.tenant_id,
      target: { type: 'connection', id },
      details: { status: detail.status },
    });
    return detail;
  }

  /** Background probe: claims up to `batch` idle connections (one instance each, SKIP LOCKED) and probes them. */
  async probeIdle(batch = 10): Promise<number> {
    const ids = await this.connectionState.claimIdleForProbe(this.db.main, batch, this.config.idleAfterMs);
    for (const id of ids)
      await rootSpan('connection.probe', () => this.check(id), { 'connection.id': id }).catch((e: unknown) =>
        this.logger.warn(`probe of ${id} failed: ${String(e)}`),
      );
    return ids.length;
  }

  private async requireLive(id: string): Promise<void> {
    const { rows } = await this.db.main.query<{ status: string }>(
      `SELECT status FROM connections WHERE id = $1`,
      [id],
    );
    if (!rows[0]) throw connectionNotFound(id);
    if (rows[0].status === 'disconnected')
      throw new VaultError(HttpStatus.CONFLICT, 'connection_not_active', 'The connection is disconnected.');
  }
}

const connectionNotFound = (id: string) =>
  new VaultError(HttpStatus.NOT_FOUND, 'connection_not_found', `No connection ${id}.`);
const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

/** Assigned onto the fresh object, not spread: cheaper for a page of 200. */
function view(r: Record<string, unknown>) {
  return Object.assign(toConnectionResponse(r), {
    tenant_name: r.tenant_name as string,
    health: r.health as Health | null,
    last_probe: r.last_probe_at
      ? {
          at: iso(r.last_probe_at),
          ok: r.last_probe_ok as boolean | null,
          error: (r.last_probe_error as string | null) ?? null,
        }
      : null,
    dispatches_24h: {
      sent: (r.dispatches_sent as number) ?? 0,
      failed: (r.dispatches_failed as number) ?? 0,
      queued: (r.dispatches_queued as number) ?? 0,
    },
  });
}

export type ConnectionHealthView = ReturnType<typeof view>;
