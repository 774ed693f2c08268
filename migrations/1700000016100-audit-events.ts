import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The audit trail (writer: src/audit/audit.store.ts): one row per change made through the API, the dashboard or the
 * CLI — who (`actor_*`, `via`), what (`action`, `target_*`, `details`), when, from which client address, and the
 * request id. Never a secret, key, token or recipient's personal data.
 *
 * Append-only, enforced here rather than trusted to the code: the trigger refuses every UPDATE and TRUNCATE, and every
 * DELETE unless the deleting transaction set `rg.audit_retention = 'on'` (SET LOCAL), which only the store's
 * retention purge does.
 *
 * `tenant_id` has no foreign key on purpose: a tenant's trail outlives the tenant (deleting it must not delete, nor be
 * refused by, its records). Indexes: the listings, newest first by `id`, by tenant, by tenant and action, by action
 * (the unfiltered one, and the retention purge's batches of the oldest records, walk the primary key).
 */
export class AuditEvents1700000016100 implements MigrationInterface {
  name = 'AuditEvents1700000016100';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE audit_events (
        id             bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at             timestamptz  NOT NULL DEFAULT now(),
        tenant_id      varchar(63),
        action         varchar(64)  NOT NULL,
        actor_type     varchar(32)  NOT NULL,
        actor_id       varchar(100),
        actor_name     varchar(100),
        via            varchar(16)  NOT NULL,
        client_address varchar(64),
        request_id     varchar(128),
        target_type    varchar(32),
        target_id      varchar(100),
        details        jsonb        NOT NULL DEFAULT '{}'
      )`);
    await queryRunner.query(`CREATE INDEX audit_events_tenant_idx ON audit_events (tenant_id, id DESC)`);
    await queryRunner.query(
      `CREATE INDEX audit_events_tenant_action_idx ON audit_events (tenant_id, action, id DESC)`,
    );
    await queryRunner.query(`CREATE INDEX audit_events_action_idx ON audit_events (action, id DESC)`);
    await queryRunner.query(`
      CREATE FUNCTION rg_audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' AND current_setting('rg.audit_retention', true) = 'on' THEN
          RETURN OLD;
        END IF;
        RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
        FOR EACH ROW EXECUTE FUNCTION rg_audit_events_append_only()`);
    await queryRunner.query(`
      CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
        FOR EACH STATEMENT EXECUTE FUNCTION rg_audit_events_append_only()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE audit_events`);
    await queryRunner.query(`DROP FUNCTION rg_audit_events_append_only()`);
  }
}
