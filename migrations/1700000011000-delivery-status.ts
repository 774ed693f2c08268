import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Delivery status of each reward, from the service's webhooks or reconciliation: `delivery_state` is ours
 * (`pending`, `delivered`, `delivery_failed`), `delivery_status` stays the service's own word (SCHEDULED, PENDING,
 * SUCCEEDED, FAILED, ...). `delivery_event_at` is when the service says the state was reached: an older event never
 * overwrites a newer state. `delivery_check_at`: when reconciliation polls the reward next (null: final, or not sent).
 */
export class DeliveryStatus1700000011000 implements MigrationInterface {
  name = 'DeliveryStatus1700000011000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE dispatch_rewards
        ADD COLUMN delivery_state varchar(20) CHECK (delivery_state IN ('pending', 'delivered', 'delivery_failed')),
        ADD COLUMN delivery_reason text,
        ADD COLUMN delivery_event_at timestamptz,
        ADD COLUMN delivery_check_at timestamptz`);
    await queryRunner.query(
      `CREATE INDEX dispatch_rewards_upstream_reward_idx ON dispatch_rewards (upstream_reward_id) WHERE upstream_reward_id IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX dispatch_rewards_delivery_check_idx ON dispatch_rewards (delivery_check_at) WHERE delivery_check_at IS NOT NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX dispatch_rewards_delivery_check_idx`);
    await queryRunner.query(`DROP INDEX dispatch_rewards_upstream_reward_idx`);
    await queryRunner.query(`
      ALTER TABLE dispatch_rewards DROP COLUMN delivery_check_at, DROP COLUMN delivery_event_at,
        DROP COLUMN delivery_reason, DROP COLUMN delivery_state`);
  }
}
