import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

export class FieldsCacheAndDispatches1700000002000 implements MigrationInterface {
  name = 'FieldsCacheAndDispatches1700000002000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE fields_cache (
        connection_id     uuid         PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
        fields            jsonb        NOT NULL,
        fetched_at        timestamptz  NOT NULL,
        forced_reload_at  timestamptz
      )`);
    await queryRunner.query(`
      CREATE TABLE reward_dispatches (
        id                 uuid          PRIMARY KEY,
        tenant_id          varchar(63)   NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        connection_id      uuid          REFERENCES connections(id) ON DELETE SET NULL,
        environment        varchar(16)   NOT NULL,
        idempotency_key    varchar(255)  NOT NULL,
        request_hash       char(64)      NOT NULL,
        request            jsonb         NOT NULL,
        upstream_payload   jsonb         NOT NULL,
        status             varchar(16)   NOT NULL CHECK (status IN ('sending', 'queued', 'sent', 'failed')),
        attempts           integer       NOT NULL DEFAULT 1,
        next_attempt_at    timestamptz,
        lease_until        timestamptz,
        upstream_order_id  varchar(100),
        upstream_order     jsonb,
        last_error         jsonb,
        response_status    integer,
        response_body      jsonb,
        created_at         timestamptz   NOT NULL DEFAULT now(),
        updated_at         timestamptz   NOT NULL DEFAULT now(),
        sent_at            timestamptz,
        UNIQUE (tenant_id, idempotency_key)
      )`);
    // The worker's claim: due retries and expired leases.
    await queryRunner.query(
      `CREATE INDEX reward_dispatches_due_idx ON reward_dispatches (next_attempt_at) WHERE status = 'queued'`,
    );
    await queryRunner.query(
      `CREATE INDEX reward_dispatches_lease_idx ON reward_dispatches (lease_until) WHERE status = 'sending'`,
    );
    await queryRunner.query(
      `CREATE INDEX reward_dispatches_tenant_idx ON reward_dispatches (tenant_id, created_at DESC)`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE reward_dispatches`);
    await queryRunner.query(`DROP TABLE fields_cache`);
  }
}
