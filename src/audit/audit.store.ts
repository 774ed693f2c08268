import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import { cursorPage, decodeCursor, encodeCursor } from '../common/page-query.dto';
import type { AuditAction, AuditActorType, AuditTargetType, AuditVia } from './audit-actions';
import type { AuditEventListResponse, AuditEventResponse, AuditQueryDto } from './dto/audit.dto';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

/** One record, as written. */
export interface AuditEventInput {
  /** The gateway's clock (retention compares with the same clock). */
  at: Date;
  tenant_id: string | null;
  action: AuditAction;
  actor_type: AuditActorType;
  actor_id: string | null;
  actor_name: string | null;
  via: AuditVia;
  client_address: string | null;
  request_id: string | null;
  target_type: AuditTargetType | null;
  target_id: string | null;
  details: Record<string, unknown>;
}

const WRITTEN: (keyof AuditEventInput)[] = [
  'at',
  'tenant_id',
  'action',
  'actor_type',
  'actor_id',
  'actor_name',
  'via',
  'client_address',
  'request_id',
  'target_type',
  'target_id',
  'details',
];

export interface AuditListFilter {
  tenantId?: string;
  action?: AuditAction;
  /** The previous page's last id. */
  beforeId?: string;
  limit: number;
}

/** A listed record: the API's view (id a string: pg reads a bigint so), its time a Date. */
type AuditEventRow = Omit<AuditEventResponse, 'at'> & { at: Date };

/**
 * The listing: each combination of filters a range of one index, newest first — (tenant_id, id),
 * (tenant_id, action, id), (action, id) or the primary key. Exported for the plan test, as PURGE_SQL.
 */
export function listingStatement(filter: AuditListFilter): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const param = (value: unknown) => `$${values.push(value)}`;
  const where: string[] = [];
  if (filter.tenantId !== undefined) where.push(`tenant_id = ${param(filter.tenantId)}`);
  if (filter.action !== undefined) where.push(`action = ${param(filter.action)}`);
  if (filter.beforeId !== undefined) where.push(`id < ${param(filter.beforeId)}::bigint`);
  return {
    text: `SELECT id, at, tenant_id, action,
                  json_build_object('type', actor_type, 'id', actor_id, 'name', actor_name, 'via', via) AS actor,
                  client_address, request_id,
                  CASE WHEN target_type IS NOT NULL THEN json_build_object('type', target_type, 'id', target_id) END AS target,
                  details
             FROM audit_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
            ORDER BY id DESC LIMIT ${param(filter.limit)}`,
    values,
  };
}

/** Retention: of the `$2` oldest records by id (a bounded range of the primary key), those older than the cutoff. */
export const PURGE_SQL = batchDelete.oldest('audit_events', 'at');

/**
 * Every statement on `audit_events`: appends, the listing, and the retention purge — the only DELETE the table's
 * trigger lets through (it sets `rg.audit_retention` for its transaction). Nothing updates a record.
 */
@Injectable()
export class AuditStore {
  constructor(private readonly db: Database) {}

  async insert(on: Sql, e: AuditEventInput): Promise<void> {
    await on.query(
      `INSERT INTO audit_events (${WRITTEN.join(', ')}) VALUES (${WRITTEN.map((_, i) => `$${i + 1}`).join(', ')})`,
      WRITTEN.map((column) => (column === 'details' ? JSON.stringify(e.details) : e[column])),
    );
  }

  /** A page of the listing, newest first, as the API answers it. */
  async page(query: AuditQueryDto & { tenantId?: string }): Promise<AuditEventListResponse> {
    const beforeId =
      query.cursor === undefined ? undefined : decodeCursor(query.cursor, /^[1-9]\d{0,17}$/)[0];
    const { page, next_cursor } = await cursorPage(
      query.limit,
      async (limit) => {
        const { text, values } = listingStatement({
          tenantId: query.tenantId,
          action: query.action,
          beforeId,
          limit,
        });
        return (await this.db.main.query<AuditEventRow>(text, values)).rows;
      },
      (last) => encodeCursor(last.id),
    );
    return { events: page.map((row) => ({ ...row, at: row.at.toISOString() })), next_cursor };
  }

  /** Retention: deletes at most `limit` records older than `olderThan`, oldest first; returns how many. */
  purgeOlderThan(olderThan: Date, limit: number): Promise<number> {
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT set_config('rg.audit_retention', 'on', true)`);
      return purgeBatch(tx, PURGE_SQL, olderThan, limit);
    });
  }
}
