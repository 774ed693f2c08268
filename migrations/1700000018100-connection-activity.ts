import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Connection activity (writer: src/connection-activity/activity.store.ts): one row per upstream request made for a
 * connection — what, when, the answer's status, latency, pacing wait, attempt, the 429s absorbed before it, the
 * outcome and our error code, and the dispatch and reward it served. Never a token, key, URL, body or recipient data.
 *
 * Written in batches off the send path (one INSERT … SELECT FROM unnest per flush, which takes `tenant_id` from the
 * connection). Rows go with their tenant (connections are never deleted otherwise). Indexes: the tenant's listing,
 * newest first ((tenant_id, created_at, id), which also serves the dashboard's per-connection hour and the tenant's
 * cascade); its dispatch filter (partial: only rows that served a dispatch); its outcome filter for the rare outcomes
 * (partial: everything but `success`, which the listing index serves). The retention purge walks the primary key.
 */
export class ConnectionActivity1700000018100 implements MigrationInterface {
  name = 'ConnectionActivity1700000018100';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE connection_activity (
        id              bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        created_at      timestamptz  NOT NULL,
        tenant_id       varchar(63)  NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        connection_id   uuid         NOT NULL,
        operation       varchar(32)  NOT NULL,
        attempt         smallint     NOT NULL,
        http_status     smallint,
        outcome         varchar(16)  NOT NULL,
        error_code      varchar(64),
        latency_ms      real         NOT NULL,
        pacing_wait_ms  real         NOT NULL,
        throttled_429   smallint     NOT NULL DEFAULT 0,
        dispatch_id     uuid,
        reward_position integer
      )`);
    await queryRunner.query(
      `CREATE INDEX connection_activity_tenant_idx ON connection_activity (tenant_id, created_at DESC, id DESC)`,
    );
    await queryRunner.query(
      `CREATE INDEX connection_activity_dispatch_idx ON connection_activity (tenant_id, dispatch_id, created_at DESC, id DESC)
        WHERE dispatch_id IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX connection_activity_outcome_idx ON connection_activity (tenant_id, outcome, created_at DESC, id DESC)
        WHERE outcome <> 'success'`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE connection_activity`);
  }
}
