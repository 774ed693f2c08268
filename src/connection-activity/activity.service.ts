import { Injectable } from '@nestjs/common';
import { ValidationFailedError } from '../common/app-error';
import { type ActivityOutcome, type ActivityRow, ActivityStore } from './activity.store';
import type { ActivityListResponse, ActivityResponse } from './dto/activity.dto';

const DEFAULT_LIMIT = 50;

/** Opaque to clients: base64url of the last row's time and id (the listing's order). */
export function encodeCursor(row: { created_at: Date; id: string }): string {
  return Buffer.from(`${row.created_at.toISOString()}|${row.id}`, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): { at: Date; id: string } {
  const [iso, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const at = new Date(iso ?? '');
  if (
    !/^\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(iso ?? '') ||
    Number.isNaN(at.getTime()) ||
    !/^[1-9]\d{0,17}$/.test(id ?? '')
  )
    throw new ValidationFailedError(
      [{ field: 'cursor', reason: 'cursor must be a next_cursor returned by this API' }],
      'The query is invalid; see details.',
    );
  return { at, id };
}

function toView(row: ActivityRow): ActivityResponse {
  return {
    id: row.id,
    at: row.created_at.toISOString(),
    connection_id: row.connection_id,
    operation: row.operation,
    attempt: row.attempt,
    http_status: row.http_status,
    outcome: row.outcome,
    error_code: row.error_code,
    latency_ms: Math.round(row.latency_ms * 10) / 10,
    pacing_wait_ms: Math.round(row.pacing_wait_ms * 10) / 10,
    throttled_429: row.throttled_429,
    dispatch_id: row.dispatch_id,
    reward_position: row.reward_position,
  };
}

@Injectable()
export class ActivityService {
  constructor(private readonly store: ActivityStore) {}

  async list(query: {
    tenantId: string;
    dispatch_id?: string;
    outcome?: ActivityOutcome;
    cursor?: string;
    limit?: number;
  }): Promise<ActivityListResponse> {
    const limit = query.limit ?? DEFAULT_LIMIT;
    const rows = await this.store.list({
      tenantId: query.tenantId,
      dispatchId: query.dispatch_id,
      outcome: query.outcome,
      before: query.cursor !== undefined ? decodeCursor(query.cursor) : undefined,
      limit: limit + 1,
    });
    const page = rows.slice(0, limit);
    return {
      activity: page.map(toView),
      next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1]) : null,
    };
  }
}
