import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Retention, erasure and offboarding (src/retention/retention.ts):
 * - `tenants.deleted_at`: a deleted tenant is gone from every route and list at once; the retention job then removes
 *   its data in bounded batches and finally the row itself. `tenants_deleted_idx` lists the few being removed.
 * - `reward_dispatches.redacted_at`: when the recipients' personal data of a settled dispatch was redacted (its ids,
 *   amounts, statuses, external ids and request hash are kept). `reward_dispatches_unredacted_idx` holds the dispatches
 *   not redacted yet, oldest first: each redaction batch is a range at its head, whatever the history's size, and a
 *   redacted dispatch leaves it.
 * - `webhook_events_connection_idx`: a deleted tenant's handled delivery webhooks, found by its connections; and
 *   `webhook_events.connection_id` now references its connection (ON DELETE CASCADE), so that none outlives it.
 * The deletion of old settled dispatches needs no new index: it walks each tenant's `reward_dispatches_tenant_idx`
 * from its oldest entry.
 */
export class Retention1700000018000 implements MigrationInterface {
  name = 'Retention1700000018000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE tenants ADD COLUMN deleted_at timestamptz`);
    await queryRunner.query(
      `CREATE INDEX tenants_deleted_idx ON tenants (deleted_at) WHERE deleted_at IS NOT NULL`,
    );
    await queryRunner.query(`ALTER TABLE reward_dispatches ADD COLUMN redacted_at timestamptz`);
    await queryRunner.query(
      `CREATE INDEX reward_dispatches_unredacted_idx ON reward_dispatches (created_at) WHERE redacted_at IS NULL`,
    );
    await queryRunner.query(`CREATE INDEX webhook_events_connection_idx ON webhook_events (connection_id)`);
    await queryRunner.query(
      `DELETE FROM webhook_events e WHERE connection_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM connections c WHERE c.id = e.connection_id)`,
    );
    await queryRunner.query(
      `ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_connection_fk
         FOREIGN KEY (connection_id) REFERENCES connections(id) ON DELETE CASCADE`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_connection_fk`);
    await queryRunner.query(`DROP INDEX webhook_events_connection_idx`);
    await queryRunner.query(`DROP INDEX reward_dispatches_unredacted_idx`);
    await queryRunner.query(`ALTER TABLE reward_dispatches DROP COLUMN redacted_at`);
    await queryRunner.query(`DROP INDEX tenants_deleted_idx`);
    await queryRunner.query(`ALTER TABLE tenants DROP COLUMN deleted_at`);
  }
}
