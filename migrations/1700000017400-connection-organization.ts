import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The rewards organization a connection's grant belongs to (writer: src/connections/connection-state.store.ts), as
 * `GET /api/v2/organizations` names it with the connection's token: its id, and its name for display. A re-consent
 * that authorizes another organization is refused by comparing with `organization_id`.
 *
 * Nullable: connections made before this column existed learn it at their next probe (which is that same call), or
 * when a re-consent needs it. No index: it is read with the connection row, never searched.
 */
export class ConnectionOrganization1700000017400 implements MigrationInterface {
  name = 'ConnectionOrganization1700000017400';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE connections
        ADD COLUMN organization_id   varchar(64),
        ADD COLUMN organization_name varchar(200)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE connections DROP COLUMN organization_name, DROP COLUMN organization_id`,
    );
  }
}
