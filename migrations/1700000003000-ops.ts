import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

export class Ops1700000003000 implements MigrationInterface {
  name = 'Ops1700000003000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE connections
        ADD COLUMN last_probe_at     timestamptz,
        ADD COLUMN last_probe_ok     boolean,
        ADD COLUMN last_probe_error  text,
        ADD COLUMN alerted_state     varchar(16)`);
    await queryRunner.query(
      `CREATE INDEX connections_probe_idx ON connections (coalesce(last_used_at, connected_at)) WHERE status IN ('active', 'error')`,
    );
    await queryRunner.query(`
      CREATE TABLE ops_alerts (
        id               bigserial    PRIMARY KEY,
        connection_id    uuid         NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
        kind             varchar(32)  NOT NULL,
        payload          jsonb        NOT NULL,
        attempts         integer      NOT NULL DEFAULT 0,
        next_attempt_at  timestamptz  NOT NULL DEFAULT now(),
        delivered_at     timestamptz,
        last_error       text,
        created_at       timestamptz  NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(
      `CREATE INDEX ops_alerts_due_idx ON ops_alerts (next_attempt_at) WHERE delivered_at IS NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX reward_dispatches_connection_idx ON reward_dispatches (connection_id, created_at DESC)`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX reward_dispatches_connection_idx`);
    await queryRunner.query(`DROP TABLE ops_alerts`);
    await queryRunner.query(`DROP INDEX connections_probe_idx`);
    await queryRunner.query(
      `ALTER TABLE connections DROP COLUMN last_probe_at, DROP COLUMN last_probe_ok, DROP COLUMN last_probe_error, DROP COLUMN alerted_state`,
    );
  }
}
