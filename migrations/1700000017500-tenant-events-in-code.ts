import type { MigrationInterface, QueryRunner } from '../src/database/migrator';
import { TENANT_EVENT_TRIGGERS } from './1700000013000-tenant-webhooks';

/**
 * Tenant events are built in code: the triggers of 1700000013000-tenant-webhooks and their functions are dropped.
 *
 * Each event (`reward.sent`, `reward.delivered`, `reward.delivery_failed`, `dispatch.completed`,
 * `connection.needs_reauth`, `connection.recovered`) is now a typed value built by the code that makes the change
 * (src/tenant-webhooks/webhook-events.ts) and written to `webhook_outbox` in the same transaction — or the same
 * statement — as the change, through src/tenant-webhooks/webhook.store.ts, the outbox's one writer. Nothing else
 * changes: the tables, their indexes and the rows already queued stay as they are. `down` creates the triggers again,
 * as they were.
 */
export class TenantEventsInCode1700000017500 implements MigrationInterface {
  name = 'TenantEventsInCode1700000017500';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of TENANT_EVENT_TRIGGERS.drop) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of TENANT_EVENT_TRIGGERS.create) await queryRunner.query(statement);
  }
}
