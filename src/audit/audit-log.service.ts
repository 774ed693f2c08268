import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import type { AuditAction, AuditActor, AuditTargetType } from './audit-actions';
import { SYSTEM_ACTOR } from './audit-actions';
import { type AuditEventInput, AuditStore } from './audit.store';
import { currentRequestContext } from '../common/request-context';

export interface AuditChange {
  /** Null: the whole gateway (a vault key rotation). */
  tenantId: string | null;
  target?: { type: AuditTargetType; id: string | null };
  /** A small summary: names, counts, states; never a secret, key, token or personal data. */
  details?: Record<string, unknown>;
  /** When the request's caller is not the actor (the admin behind a connect link). */
  actor?: AuditActor;
}

/** Keys a `details` object must not have: they would hold a secret or a recipient's personal data. */
const FORBIDDEN_DETAIL = /secret|token|password|passphrase|email|phone|^key$|plaintext|recipient_name/i;

/**
 * The audit trail's one way in (who, from where, the request id: from the request context). `record(…, tx)` commits
 * or rolls back with the change; `recordCommitted` follows a change already committed: a failure to write is logged,
 * never turned into a failed answer (a webhook secret shown once must reach its caller).
 */
@Injectable()
export class AuditLog {
  private readonly logger = new Logger(AuditLog.name);

  constructor(
    private readonly store: AuditStore,
    private readonly db: Database,
    private readonly clock: Clock,
  ) {}

  async record(action: AuditAction, change: AuditChange, tx: Sql): Promise<void> {
    await this.store.insert(tx, this.event(action, change));
  }

  async recordCommitted(action: AuditAction, change: AuditChange): Promise<void> {
    const event = this.event(action, change);
    try {
      await this.store.insert(this.db.main, event);
    } catch (error) {
      this.logger.error(
        { action, tenantId: change.tenantId, target: change.target, requestId: event.request_id },
        `audit record not written: ${(error as Error).message}`,
      );
    }
  }

  private event(action: AuditAction, change: AuditChange): AuditEventInput {
    const details = change.details ?? {};
    const forbidden = Object.keys(details).filter((key) => FORBIDDEN_DETAIL.test(key));
    // A programming error: refused loudly rather than written into an append-only table.
    if (forbidden.length) throw new Error(`audit details must not carry ${forbidden.join(', ')}`);
    const context = currentRequestContext();
    const actor = change.actor ?? context?.actor ?? SYSTEM_ACTOR;
    return {
      at: new Date(this.clock.now()),
      tenant_id: change.tenantId,
      action,
      actor_type: actor.type,
      actor_id: actor.id,
      actor_name: actor.name,
      via: actor.via,
      client_address: context?.clientAddress ?? null,
      request_id: context?.requestId ?? null,
      target_type: change.target?.type ?? null,
      target_id: change.target?.id ?? null,
      details,
    };
  }
}
