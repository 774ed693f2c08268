import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Dispatches of a connection that was disconnected are never sent: their unsent rewards end `cancelled`, and the
 * dispatch too when nothing of it went out. Indexes for the background purge of expired connect sessions, OAuth
 * states and old connection events (bounded batches, oldest first).
 */
export class DispatchCancelAndHousekeeping1700000005000 implements MigrationInterface {
  name = 'DispatchCancelAndHousekeeping1700000005000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE reward_dispatches DROP CONSTRAINT reward_dispatches_status_check`);
    await queryRunner.query(`
      ALTER TABLE reward_dispatches ADD CONSTRAINT reward_dispatches_status_check
        CHECK (status IN ('sending', 'queued', 'sent', 'partially_failed', 'failed', 'pending_approval', 'cancelled'))`);
    await queryRunner.query(`ALTER TABLE dispatch_rewards DROP CONSTRAINT dispatch_rewards_status_check`);
    await queryRunner.query(`
      ALTER TABLE dispatch_rewards ADD CONSTRAINT dispatch_rewards_status_check
        CHECK (status IN ('pending', 'sending', 'sent', 'pending_approval', 'failed', 'cancelled'))`);
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS connect_sessions_expires_idx ON connect_sessions (expires_at)`,
    );
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS oauth_states_expires_idx ON oauth_states (expires_at)`,
    );
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS connection_events_at_idx ON connection_events (at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS connection_events_at_idx`);
    await queryRunner.query(`DROP INDEX IF EXISTS oauth_states_expires_idx`);
    await queryRunner.query(`DROP INDEX IF EXISTS connect_sessions_expires_idx`);
    await queryRunner.query(`UPDATE dispatch_rewards SET status = 'failed' WHERE status = 'cancelled'`);
    await queryRunner.query(`UPDATE reward_dispatches SET status = 'failed' WHERE status = 'cancelled'`);
    await queryRunner.query(`ALTER TABLE dispatch_rewards DROP CONSTRAINT dispatch_rewards_status_check`);
    await queryRunner.query(`
      ALTER TABLE dispatch_rewards ADD CONSTRAINT dispatch_rewards_status_check
        CHECK (status IN ('pending', 'sending', 'sent', 'pending_approval', 'failed'))`);
    await queryRunner.query(`ALTER TABLE reward_dispatches DROP CONSTRAINT reward_dispatches_status_check`);
    await queryRunner.query(`
      ALTER TABLE reward_dispatches ADD CONSTRAINT reward_dispatches_status_check
        CHECK (status IN ('sending', 'queued', 'sent', 'partially_failed', 'failed', 'pending_approval'))`);
  }
}
