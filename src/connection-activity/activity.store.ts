import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import type { UpstreamOperation } from '../rewards-api/call-recorder';

/** How an upstream request ended, from its answer (see docs/api.md, "Connection activity"). */
export const ACTIVITY_OUTCOMES = ['success', 'throttled', 'unauthorized', 'rejected', 'unavailable'] as const;
export type ActivityOutcome = (typeof ACTIVITY_OUTCOMES)[number];

/** One upstream request, as recorded. Nothing else: no token, key, URL, body or recipient data. */
export interface ActivityRecord {
  /** When the request went out (the gateway's clock). */
  at: Date;
  connectionId: string;
  operation: UpstreamOperation;
  attempt: number;
  /** The answer's status; null when none came (a timeout, a network error). */
  httpStatus: number | null;
  outcome: ActivityOutcome;
  /** Our error code for the answer (docs/api.md, "Error codes"); null on success. */
  errorCode: string | null;
  latencyMs: number;
  pacingWaitMs: number;
  throttled: number;
  dispatchId: string | null;
  rewardPosition: number | null;
}

export interface ActivityRow {
  /** bigint: pg reads it as a string. */
  id: string;
  created_at: Date;
  connection_id: string;
  operation: UpstreamOperation;
  attempt: number;
  http_status: number | null;
  outcome: ActivityOutcome;
  error_code: string | null;
  latency_ms: number;
  pacing_wait_ms: number;
  throttled_429: number;
  dispatch_id: string | null;
  reward_position: number | null;
}

export interface ActivityListFilter {
  tenantId: string;
  dispatchId?: string;
  outcome?: ActivityOutcome;
  connectionId?: string;
  /** Only rows before this one in the listing's order (the previous page's last row). */
  before?: { at: Date; id: string };
  limit: number;
}

/** A connection's last stretch, for the dashboard. */
export interface ActivitySummary {
  calls: number;
  errors: number;
  throttled: number;
  p50_ms: number | null;
  p95_ms: number | null;
}

const COLUMNS = `id, created_at, connection_id, operation, attempt, http_status, outcome, error_code, latency_ms,
                 pacing_wait_ms, throttled_429, dispatch_id, reward_position`;

/**
 * The flush: one statement for the whole batch, whatever its size (the rows as arrays, unnested), prepared once per
 * connection. `tenant_id` comes from the connection; rows of a connection that no longer exists are left out.
 */
export const INSERT_SQL = `INSERT INTO connection_activity
    (created_at, tenant_id, connection_id, operation, attempt, http_status, outcome, error_code, latency_ms,
     pacing_wait_ms, throttled_429, dispatch_id, reward_position)
  SELECT r.created_at, c.tenant_id, r.connection_id, r.operation, r.attempt, r.http_status, r.outcome, r.error_code,
         r.latency_ms, r.pacing_wait_ms, r.throttled_429, r.dispatch_id, r.reward_position
    FROM unnest($1::timestamptz[], $2::uuid[], $3::text[], $4::int2[], $5::int2[], $6::text[], $7::text[],
                $8::float4[], $9::float4[], $10::int2[], $11::uuid[], $12::int4[])
         AS r(created_at, connection_id, operation, attempt, http_status, outcome, error_code, latency_ms,
              pacing_wait_ms, throttled_429, dispatch_id, reward_position)
    JOIN connections c ON c.id = r.connection_id`;

/**
 * The listing's statement: a range of one index, newest first — (tenant_id, created_at, id), or with a dispatch the
 * partial (tenant_id, dispatch_id, created_at, id), or with an outcome other than success the partial
 * (tenant_id, outcome, created_at, id). Exported for the plan test.
 */
export function listingStatement(filter: ActivityListFilter): { text: string; values: unknown[] } {
  const values: unknown[] = [filter.tenantId];
  const where = ['tenant_id = $1'];
  if (filter.dispatchId !== undefined) {
    values.push(filter.dispatchId);
    where.push(`dispatch_id = $${values.length}`, 'dispatch_id IS NOT NULL');
  }
  if (filter.outcome !== undefined) {
    values.push(filter.outcome);
    where.push(`outcome = $${values.length}`);
    if (filter.outcome !== 'success') where.push(`outcome <> 'success'`);
  }
  if (filter.connectionId !== undefined) {
    values.push(filter.connectionId);
    where.push(`connection_id = $${values.length}`);
  }
  if (filter.before !== undefined) {
    values.push(filter.before.at, filter.before.id);
    where.push(`(created_at, id) < ($${values.length - 1}::timestamptz, $${values.length}::bigint)`);
  }
  values.push(filter.limit);
  return {
    text: `SELECT ${COLUMNS} FROM connection_activity WHERE ${where.join(' AND ')}
            ORDER BY created_at DESC, id DESC LIMIT $${values.length}`,
    values,
  };
}

/**
 * The dashboard's last hour of a connection: of its newest `$4` requests since `$3`, the counts and latency percentiles —
 * a range of the tenant's listing index, bounded however busy the connection. Exported for the plan test.
 */
export const SUMMARY_SQL = `SELECT count(*)::int AS calls,
       count(*) FILTER (WHERE outcome <> 'success')::int AS errors,
       count(*) FILTER (WHERE outcome = 'throttled')::int AS throttled,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95_ms
  FROM (SELECT outcome, latency_ms FROM connection_activity
         WHERE tenant_id = $1 AND created_at >= $3 AND connection_id = $2
         ORDER BY created_at DESC, id DESC LIMIT $4) a`;

/**
 * The retention purge: of the `$2` oldest rows (by id, the primary key: a bounded range whatever the table's size),
 * those older than the cutoff. Ids follow the flushes, so the old rows come first; a row not old enough is left.
 */
export const PURGE_SQL = `DELETE FROM connection_activity
  WHERE id = ANY (ARRAY(SELECT id FROM connection_activity ORDER BY id LIMIT $2)) AND created_at < $1`;

/** A deleted tenant's rows, a batch at a time (a range of the tenant's listing index). */
export const PURGE_TENANT_SQL = `DELETE FROM connection_activity
  WHERE id = ANY (ARRAY(SELECT id FROM connection_activity WHERE tenant_id = $1 LIMIT $2))`;

/** Every statement that writes `connection_activity`: the batched insert, the retention purge, a tenant's removal. */
@Injectable()
export class ActivityStore {
  constructor(private readonly db: Database) {}

  /**
   * Writes a batch in one statement on the relaxed pool (asynchronous commit: a record lost in a crash costs nothing
   * that the rest of the gateway relies on). Returns how many rows were written.
   */
  async insertBatch(records: readonly ActivityRecord[]): Promise<number> {
    if (!records.length) return 0;
    const col = <K extends keyof ActivityRecord>(key: K) => records.map((r) => r[key]);
    const { rowCount } = await this.db.relaxed.query({
      name: 'rg_activity_insert',
      text: INSERT_SQL,
      values: [
        col('at'),
        col('connectionId'),
        col('operation'),
        col('attempt'),
        col('httpStatus'),
        col('outcome'),
        col('errorCode'),
        col('latencyMs'),
        col('pacingWaitMs'),
        col('throttled'),
        col('dispatchId'),
        col('rewardPosition'),
      ],
    });
    return rowCount ?? 0;
  }

  /** Newest first, `limit` rows after `before` (listingStatement). */
  async list(filter: ActivityListFilter): Promise<ActivityRow[]> {
    const { text, values } = listingStatement(filter);
    const { rows } = await this.db.main.query<ActivityRow>(text, values);
    return rows;
  }

  /** A connection's requests since `since`, at most the newest `cap` of them: counts and latency percentiles. */
  async summary(tenantId: string, connectionId: string, since: Date, cap: number): Promise<ActivitySummary> {
    const { rows } = await this.db.main.query<ActivitySummary>(SUMMARY_SQL, [
      tenantId,
      connectionId,
      since,
      cap,
    ]);
    return rows[0];
  }

  /**
   * Retention: deletes at most `limit` rows older than `cutoff`, oldest first; returns how many. Call it again until it
   * returns less than `limit`: each batch is one short statement.
   */
  async purgeOlderThan(cutoff: Date, limit: number): Promise<number> {
    const { rowCount } = await this.db.main.query(PURGE_SQL, [cutoff, limit]);
    return rowCount ?? 0;
  }

  /**
   * A tenant leaving: deletes at most `limit` of its rows; returns how many (call again until less). Its rows also go
   * with the tenant's row (foreign key), but in one statement: batches keep each transaction short.
   */
  async purgeTenant(tenantId: string, limit: number): Promise<number> {
    const { rowCount } = await this.db.main.query(PURGE_TENANT_SQL, [tenantId, limit]);
    return rowCount ?? 0;
  }
}
