import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The `/ops` dashboard's plot of the last hour: rewards sent and rewards failed per minute, read from `dispatch_rewards`
 * (`src/ops/dashboard.data.ts`, ACTIVITY_SQL) — a range of the last hour on two small partial indexes instead of a scan
 * of every reward ever sent:
 * - `dispatch_rewards_sent_at_idx` on `sent_at`, rows with a `sent_at` only (set once, when the reward is sent);
 * - `dispatch_rewards_failed_at_idx` on `updated_at`, failed rows only (a failed reward is final: its `updated_at` is
 *   when it failed).
 * Rewards still pending or sending have no entry in either, so the hot send path writes an entry once per reward, when
 * it settles. `test/ops-dashboard.e2e-spec.ts` checks that the plot's plan uses both.
 */
export class Dashboard1700000014000 implements MigrationInterface {
  name = 'Dashboard1700000014000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX dispatch_rewards_sent_at_idx ON dispatch_rewards (sent_at) WHERE sent_at IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX dispatch_rewards_failed_at_idx ON dispatch_rewards (updated_at) WHERE status = 'failed'`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX dispatch_rewards_failed_at_idx`);
    await queryRunner.query(`DROP INDEX dispatch_rewards_sent_at_idx`);
  }
}
