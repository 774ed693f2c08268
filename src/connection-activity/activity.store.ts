import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import type { UpstreamOperation } from '../rewards-api/call-recorder';

export const ACTIVITY_OUTCOMES = ['success', 'throttled', 'unauthorized', 'rejected', 'unavailable'] as const;
export type ActivityOutcome = (typeof ACTIVITY_OUTCOMES)[number];

/** One upstream request, as recorded: never a token, key, URL, body or recipient data. */
export interface ActivityRecord {
  at: Date;
  connectionId: string;
  operation: UpstreamOperation;
  attempt: number;
  /** Null when no answer came. */
  httpStatus: number | null;
  outcome: ActivityOutcome;
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
  /** The previous page's last row. */
  before?: { at: Date; id: string };
  limit: number;
}

export interface ActivitySummary {
  calls: number;
  errors: number;
  throttled: number;
  p50_ms: number | null;
  p95_ms: number | null;
}

const COLUMNS = `id, created_at, connection_id, operation, attempt, http_status, outcome, error_code, latency_ms,
                 pacing_wait_ms, throttled_429, dispatch_id, reward_position`;

const INSERTED: (keyof ActivityRecord)[] = [
  'at',
  'connectionId',
  'operation',
  'attempt',
  'httpStatus',
  'outcome',
  'errorCode',
  'latencyMs',
  'pacingWaitMs',
  'throttled',
  'dispatchId',
  'rewardPosition',
];

/**
 * A whole batch in one prepared statement (the rows as unnested arrays); `tenant_id` from the connection, rows of a
 * connection that no longer exists left out.
 */
const INSERT_SQL = `INSERT INTO connection_activity
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
 * The listing: a range of one index, newest first — (tenant_id, created_at, id), or the partial one by dispatch, or by
 * outcome other than success. Exported for the plan test, as the statements below.
 */
export function listingStatement(filter: ActivityListFilter): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const param = (value: unknown) => `$${values.push(value)}`;
  const where = [`tenant_id = ${param(filter.tenantId)}`];
  if (filter.dispatchId !== undefined)
    where.push(`dispatch_id = ${param(filter.dispatchId)}`, 'dispatch_id IS NOT NULL');
  if (filter.outcome !== undefined) {
    where.push(`outcome = ${param(filter.outcome)}`);
    if (filter.outcome !== 'success') where.push(`outcome <> 'success'`);
  }
  if (filter.connectionId !== undefined) where.push(`connection_id = ${param(filter.connectionId)}`);
  if (filter.before !== undefined)
    where.push(
      `(created_at, id) < (${param(filter.before.at)}::timestamptz, ${param(filter.before.id)}::bigint)`,
    );
  return {
    text: `SELECT ${COLUMNS} FROM connection_activity WHERE ${where.join(' AND ')}
            ORDER BY created_at DESC, id DESC LIMIT ${param(filter.limit)}`,
    values,
  };
}

/** A connection's newest `$4` requests since `$3`: counts and latency percentiles, bounded however busy it is. */
export const SUMMARY_SQL = `SELECT count(*)::int AS calls,
       count(*) FILTER (WHERE outcome <> 'success')::int AS errors,
       count(*) FILTER (WHERE outcome = 'throttled')::int AS throttled,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95_ms
  FROM (SELECT outcome, latency_ms FROM connection_activity
         WHERE tenant_id = $1 AND created_at >= $3 AND connection_id = $2
         ORDER BY created_at DESC, id DESC LIMIT $4) a`;

/** Retention: of the `$2` oldest rows by id (a bounded range of the primary key), those older than the cutoff. */
export const PURGE_SQL = `DELETE FROM connection_activity
  WHERE id = ANY (ARRAY(SELECT id FROM connection_activity ORDER BY id LIMIT $2)) AND created_at < $1`;

/** A deleted tenant's rows, a batch at a time (a range of the tenant's listing index). */
export const PURGE_TENANT_SQL = `DELETE FROM connection_activity
  WHERE id = ANY (ARRAY(SELECT id FROM connection_activity WHERE tenant_id = $1 LIMIT $2))`;

@Injectable()
export class ActivityStore {
  constructor(private readonly db: Database) {}

  /** A batch on the relaxed pool (a record lost in a crash costs nothing the gateway relies on); rows written. */
  async insertBatch(records: readonly ActivityRecord[]): Promise<number> {
    if (!records.length) return 0;
    const { rowCount } = await this.db.relaxed.query({
      name: 'rg_activity_insert',
      text: INSERT_SQL,
      values: INSERTED.map((key) => records.map((r) => r[key])),
    });
    return rowCount ?? 0;
  }

  async list(filter: ActivityListFilter): Promise<ActivityRow[]> {
    const { text, values } = listingStatement(filter);
    const { rows } = await this.db.main.query<ActivityRow>(text, values);
    return rows;
  }

  async summary(tenantId: string, connectionId: string, since: Date, cap: number): Promise<ActivitySummary> {
    const { rows } = await this.db.main.query<ActivitySummary>(SUMMARY_SQL, [
      tenantId,
      connectionId,
      since,
      cap,
    ]);
    return rows[0];
  }

  /** Retention: deletes at most `limit` rows older than `cutoff`, oldest first; returns how many. */
  async purgeOlderThan(cutoff: Date, limit: number): Promise<number> {
    const { rowCount } = await this.db.main.query(PURGE_SQL, [cutoff, limit]);
    return rowCount ?? 0;
  }

  /** A tenant leaving: deletes at most `limit` of its rows (batches keep each transaction short). */
  async purgeTenant(tenantId: string, limit: number): Promise<number> {
    const { rowCount } = await this.db.main.query(PURGE_TENANT_SQL, [tenantId, limit]);
    return rowCount ?? 0;
  }
}
