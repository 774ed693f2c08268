import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The rows a sender may still change, reachable by key whatever plan Postgres picks (see DISPATCH_SQL in
 * src/reward-dispatch/dispatch.store.ts):
 * - `dispatch_rewards_open_idx`: rewards not settled yet (`pending` / `sending`), by dispatch and position. The writes,
 *   cancels, give-ups and slices of a dispatch find its open rewards here.
 * - `reward_dispatches_sending_idx`: dispatches held by a sender, by id. The writes find their dispatch here, and the
 *   worker's claim finds expired leases among them. It replaces `reward_dispatches_lease_idx` (on `lease_until`): with
 *   no index on `lease_until` any more, a write that only extends a lease changes no indexed column and can be a HOT
 *   update.
 * Both stay as small as the work in flight, so a plan made while the tables were empty (and kept by the plan cache
 * as they grow) still finds them cheaper than a scan of the table.
 */
export class DispatchOpenIndexes1700000015000 implements MigrationInterface {
  name = 'DispatchOpenIndexes1700000015000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX dispatch_rewards_open_idx ON dispatch_rewards (dispatch_id, position) WHERE status IN ('pending', 'sending')`,
    );
    await queryRunner.query(
      `CREATE INDEX reward_dispatches_sending_idx ON reward_dispatches (id) WHERE status = 'sending'`,
    );
    await queryRunner.query(`DROP INDEX reward_dispatches_lease_idx`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX reward_dispatches_lease_idx ON reward_dispatches (lease_until) WHERE status = 'sending'`,
    );
    await queryRunner.query(`DROP INDEX reward_dispatches_sending_idx`);
    await queryRunner.query(`DROP INDEX dispatch_rewards_open_idx`);
  }
}
