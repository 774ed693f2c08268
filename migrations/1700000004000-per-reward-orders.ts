import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The current rewards service takes one reward per order: a dispatch of N rewards becomes N upstream orders, each
 * with its own durable state. `dispatch_rewards` holds one row per reward of a dispatch (its exact upstream payload,
 * its own external_id, status and upstream ids); the dispatch's status is derived from them. Dispatches written
 * before this migration were sent as one array-form order: they get `order_shape = 'array'` and reward rows built
 * from their stored payload, so their replays and views keep working.
 *
 * `rewards_environments` records environment-wide trouble that is not any one tenant's fault: the gateway's own app
 * credentials rejected (`invalid_client`), alerted once across instances.
 */
export class PerRewardOrders1700000004000 implements MigrationInterface {
  name = 'PerRewardOrders1700000004000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE reward_dispatches ADD COLUMN order_shape varchar(8) NOT NULL DEFAULT 'array'`,
    );
    await queryRunner.query(`ALTER TABLE reward_dispatches ALTER COLUMN order_shape DROP DEFAULT`);
    await queryRunner.query(`ALTER TABLE reward_dispatches DROP CONSTRAINT reward_dispatches_status_check`);
    await queryRunner.query(`
      ALTER TABLE reward_dispatches ADD CONSTRAINT reward_dispatches_status_check
        CHECK (status IN ('sending', 'queued', 'sent', 'partially_failed', 'failed', 'pending_approval'))`);
    await queryRunner.query(`
      CREATE TABLE dispatch_rewards (
        dispatch_id            uuid          NOT NULL REFERENCES reward_dispatches(id) ON DELETE CASCADE,
        position               integer       NOT NULL,
        external_id            varchar(128)  NOT NULL,
        status                 varchar(20)   NOT NULL
                               CHECK (status IN ('pending', 'sending', 'sent', 'pending_approval', 'failed')),
        upstream_payload       jsonb         NOT NULL,
        attempts               integer       NOT NULL DEFAULT 0,
        upstream_order_id      varchar(100),
        upstream_reward_id     varchar(100),
        upstream_order_status  varchar(64),
        delivery_method        varchar(16),
        delivery_status        varchar(32),
        link_enc               text,
        last_error             jsonb,
        next_check_at          timestamptz,
        sent_at                timestamptz,
        updated_at             timestamptz   NOT NULL DEFAULT now(),
        PRIMARY KEY (dispatch_id, position)
      )`);
    // The approval reconciliation's claim: orders held upstream, due for a check.
    await queryRunner.query(
      `CREATE INDEX dispatch_rewards_approval_idx ON dispatch_rewards (next_check_at) WHERE status = 'pending_approval'`,
    );
    await queryRunner.query(`
      INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload, attempts, upstream_order_id,
                                    upstream_reward_id, upstream_order_status, delivery_method, delivery_status, last_error, sent_at)
      SELECT d.id, (r.ord - 1)::int, d.id::text,
             CASE d.status WHEN 'sent' THEN 'sent' WHEN 'failed' THEN 'failed' ELSE 'pending' END,
             r.payload, d.attempts, d.upstream_order_id, d.upstream_order->'rewards'->((r.ord - 1)::int)->>'id',
             d.upstream_order->>'status', coalesce(r.payload->'delivery'->>'method', 'EMAIL'),
             d.upstream_order->'rewards'->((r.ord - 1)::int)->'delivery'->>'status',
             CASE WHEN d.status = 'failed' THEN d.last_error END, d.sent_at
        FROM reward_dispatches d, jsonb_array_elements(d.upstream_payload->'rewards') WITH ORDINALITY AS r(payload, ord)`);
    await queryRunner.query(`
      CREATE TABLE rewards_environments (
        name                       varchar(16)  PRIMARY KEY,
        app_credentials_invalid_at timestamptz,
        app_credentials_message    text,
        alerted_at                 timestamptz,
        updated_at                 timestamptz  NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`ALTER TABLE ops_alerts ALTER COLUMN connection_id DROP NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DELETE FROM ops_alerts WHERE connection_id IS NULL`);
    await queryRunner.query(`ALTER TABLE ops_alerts ALTER COLUMN connection_id SET NOT NULL`);
    await queryRunner.query(`DROP TABLE rewards_environments`);
    await queryRunner.query(`DROP TABLE dispatch_rewards`);
    await queryRunner.query(
      `UPDATE reward_dispatches SET status = 'failed' WHERE status IN ('partially_failed', 'pending_approval')`,
    );
    await queryRunner.query(`ALTER TABLE reward_dispatches DROP CONSTRAINT reward_dispatches_status_check`);
    await queryRunner.query(`
      ALTER TABLE reward_dispatches ADD CONSTRAINT reward_dispatches_status_check
        CHECK (status IN ('sending', 'queued', 'sent', 'failed'))`);
    await queryRunner.query(`ALTER TABLE reward_dispatches DROP COLUMN order_shape`);
  }
}
