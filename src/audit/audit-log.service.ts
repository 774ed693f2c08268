import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import type { AuditAction, AuditActor, AuditTargetType } from './audit-actions';
import { SYSTEM_ACTOR } from './audit-actions';
import { AuditStore } from './audit.store';
import { currentRequestContext } from './request-context';

/** What a change was made to, as the caller of `AuditLog.record` describes it. */
export interface AuditChange {
  /** The tenant the change belongs to (null: the whole gateway, e.g. a vault key rotation). */
  tenantId: string | null;
  target?: { type: AuditTargetType; id: string | null };
  /** A small summary of the change: names, counts, states. Never a secret, key, token or personal data. */
  details?: Record<string, unknown>;
  /** Who, when the request's caller is not the actor (the connect callback: the admin behind a connect link). */
  actor?: AuditActor;
}

/** Keys a `details` object must not have: they would hold a secret or a recipient's personal data. */
const FORBIDDEN_DETAIL = /secret|token|password|passphrase|email|phone|^key$|plaintext|recipient_name/i;

/**
 * The audit trail's one way in. Services call `record` for each change, with the transaction's client when the change
 * is one transaction (the record commits, or rolls back, with it), else right after the change committed. Who, from
 * where and the request id come from the request context the pipeline set (request-context.ts).
 *
 *     await this.audit.record('recipient.erased', { tenantId, target: { type: 'recipient', id: null },
 *       details: { rewards: 3 } }, tx);
 */
@Injectable()
export class AuditLog {
  constructor(
    private readonly store: AuditStore,
    private readonly db: Database,
    private readonly clock: Clock,
  ) {}

  async record(action: AuditAction, change: AuditChange, on: Sql = this.db.main): Promise<void> {
    const details = change.details ?? {};
    const forbidden = Object.keys(details).filter((key) => FORBIDDEN_DETAIL.test(key));
    // A programming error, refused loudly (tests catch it) rather than written into an append-only table.
    if (forbidden.length) throw new Error(`audit details must not carry ${forbidden.join(', ')}`);
    const context = currentRequestContext();
    await this.store.insert(on, {
      at: new Date(this.clock.now()),
      action,
      tenantId: change.tenantId,
      actor: change.actor ?? context?.actor ?? SYSTEM_ACTOR,
      clientAddress: context?.clientAddress ?? null,
      requestId: context?.requestId ?? null,
      target: change.target ?? null,
      details,
    });
  }
}
