import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { cursorPage, decodeCursor, encodeCursor, invalidCursor } from '../common/page-query.dto';
import type { ActivityListResponse, ActivityQueryDto, ActivityResponse } from './dto/activity.dto';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

export const ACTIVITY_OUTCOMES = ['success', 'throttled', 'unauthorized', 'rejected', 'unavailable'] as const;
export type ActivityOutcome = (typeof ACTIVITY_OUTCOMES)[number];

/** One upstream request as stored: the API's view, its time a Date; never a token, key, URL, body or recipient data. */
export type ActivityRow = Omit<ActivityResponse, 'at'> & { created_at: Date };

export type ActivityRecord = Omit<ActivityRow, 'id'>;

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

/** The recorded columns and their types: one list for the insert's arrays, its values and the listing. */
const INSERTED: Record<keyof ActivityRecord, string> = {
  created_at: 'timestamptz',
  connection_id: 'uuid',
  operation: 'text',
  attempt: 'int2',
  http_status: 'int2',
  outcome: 'text',
  error_code: 'text',
  latency_ms: 'float4',
  pacing_wait_ms: 'float4',
  throttled_429: 'int2',
  dispatch_id: 'uuid',
  reward_position: 'int4',
};
const RECORDED = Object.keys(INSERTED) as (keyof ActivityRecord)[];
const COLUMNS = ['id', ...RECORDED].join(', ');

/**
 * A whole batch in one prepared statement (the rows as unnested arrays); `tenant_id` from the connection, rows of a
 * connection that no longer exists left out.
 */
const INSERT_SQL = `INSERT INTO connection_activity (tenant_id, ${RECORDED.join(', ')})
  SELECT c.tenant_id, ${RECORDED.map((column) => `r.${column}`).join(', ')}
    FROM unnest(${RECORDED.map((column, i) => `$${i + 1}::${INSERTED[column]}[]`).join(', ')}) AS r(${RECORDED.join(', ')})
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
export const PURGE_SQL = batchDelete.oldest('connection_activity', 'created_at');

/** A deleted tenant's rows, a batch at a time (a range of the tenant's listing index). */
export const PURGE_TENANT_SQL = batchDelete.matching('connection_activity', 'id', 'tenant_id = $1');

function decodeActivityCursor(cursor: string): { at: Date; id: string } {
  const [iso, id] = decodeCursor(cursor, /^\d{4}-\d\d-\d\dT[\d:.]+Z$/, /^[1-9]\d{0,17}$/);
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) throw invalidCursor();
  return { at, id };
}

const tenth = (ms: number) => Math.round(ms * 10) / 10;

function toView({ id, created_at, ...row }: ActivityRow): ActivityResponse {
  return {
    id,
    at: created_at.toISOString(),
    ...row,
    latency_ms: tenth(row.latency_ms),
    pacing_wait_ms: tenth(row.pacing_wait_ms),
  };
}

@Injectable()
export class ActivityStore {
  constructor(private readonly db: Database) {}

  /** A batch on the relaxed pool (a record lost in a crash costs nothing the gateway relies on); rows written. */
  async insertBatch(records: readonly ActivityRecord[]): Promise<number> {
    if (!records.length) return 0;
    const { rowCount } = await this.db.relaxed.query({
      name: 'rg_activity_insert',
      text: INSERT_SQL,
      values: RECORDED.map((column) => records.map((r) => r[column])),
    });
    return rowCount ?? 0;
  }

  /** A page of a tenant's listing, newest first, as the API answers it. */
  async page(query: ActivityQueryDto & { tenantId: string }): Promise<ActivityListResponse> {
    const before = query.cursor === undefined ? undefined : decodeActivityCursor(query.cursor);
    const { page, next_cursor } = await cursorPage(
      query.limit,
      (limit) =>
        this.list({
          tenantId: query.tenantId,
          dispatchId: query.dispatch_id,
          outcome: query.outcome,
          before,
          limit,
        }),
      (last) => encodeCursor(last.created_at.toISOString(), last.id),
    );
    return { activity: page.map(toView), next_cursor };
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
  purgeOlderThan(cutoff: Date, limit: number): Promise<number> {
    return purgeBatch(this.db.main, PURGE_SQL, cutoff, limit);
  }

  /** A tenant leaving: deletes at most `limit` of its rows (batches keep each transaction short). */
  purgeTenant(tenantId: string, limit: number): Promise<number> {
    return purgeBatch(this.db.main, PURGE_TENANT_SQL, tenantId, limit);
  }
}
