import { Injectable } from '@nestjs/common';
import { ValidationFailedError } from '../common/app-error';
import type { AuditAction } from './audit-actions';
import { type AuditEventRow, AuditStore } from './audit.store';
import type { AuditEventListResponse, AuditEventResponse } from './dto/audit.dto';

const DEFAULT_LIMIT = 50;

/** Opaque to clients: base64url of the last record's id. */
function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[1-9]\d{0,17}$/.test(id))
    throw new ValidationFailedError(
      [{ field: 'cursor', reason: 'cursor must be a next_cursor returned by this API' }],
      'The query is invalid; see details.',
    );
  return id;
}

function toView(row: AuditEventRow): AuditEventResponse {
  return {
    id: row.id,
    at: row.at.toISOString(),
    tenant_id: row.tenant_id,
    action: row.action,
    actor: { type: row.actor_type, id: row.actor_id, name: row.actor_name, via: row.via },
    client_address: row.client_address,
    request_id: row.request_id,
    target: row.target_type ? { type: row.target_type, id: row.target_id } : null,
    details: row.details,
  };
}

@Injectable()
export class AuditService {
  constructor(private readonly store: AuditStore) {}

  async list(query: {
    tenantId?: string;
    action?: AuditAction;
    cursor?: string;
    limit?: number;
  }): Promise<AuditEventListResponse> {
    const limit = query.limit ?? DEFAULT_LIMIT;
    const rows = await this.store.list({
      tenantId: query.tenantId,
      action: query.action,
      beforeId: query.cursor !== undefined ? decodeCursor(query.cursor) : undefined,
      limit: limit + 1,
    });
    const page = rows.slice(0, limit);
    return {
      events: page.map(toView),
      next_cursor: rows.length > limit ? Buffer.from(page[page.length - 1].id).toString('base64url') : null,
    };
  }
}
