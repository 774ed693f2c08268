import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Per-account pacing and batches.
 * - `account_pace`: one row per upstream account (keyed by connection) — the GCRA "theoretical arrival time" of its
 *   next request, the slot last handed out, and the AIMD factor that a 429 halves. Written only by rewards-api/account-pacer.ts.
 * - `reward_dispatches.reward_count`: how many rewards a dispatch holds (progress without counting rows);
 *   `priority`: 0 interactive (a send answered inline), 1 bulk (a batch answered 202 at once);
 *   `cancel_requested_at`: set by `POST …/dispatches/{id}/cancel`.
 */
export class PacingAndBatches1700000010000 implements MigrationInterface {
  name = 'PacingAndBatches1700000010000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE account_pace (
        account_key text PRIMARY KEY,
        tat timestamptz NOT NULL,
        last_slot timestamptz NOT NULL,
        factor float8 NOT NULL DEFAULT 1 CHECK (factor > 0 AND factor <= 1),
        throttled_429 bigint NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      ALTER TABLE reward_dispatches
        ADD COLUMN reward_count int NOT NULL DEFAULT 0,
        ADD COLUMN priority smallint NOT NULL DEFAULT 0 CHECK (priority IN (0, 1)),
        ADD COLUMN cancel_requested_at timestamptz`);
    await queryRunner.query(`
      UPDATE reward_dispatches d SET reward_count = c.n
        FROM (SELECT dispatch_id, count(*)::int AS n FROM dispatch_rewards GROUP BY dispatch_id) c
       WHERE c.dispatch_id = d.id`);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS reward_dispatches_running_idx ON reward_dispatches (created_at)
        WHERE status IN ('queued', 'sending') AND reward_count > 1`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS reward_dispatches_running_idx`);
    await queryRunner.query(`
      ALTER TABLE reward_dispatches DROP COLUMN cancel_requested_at, DROP COLUMN priority, DROP COLUMN reward_count`);
    await queryRunner.query(`DROP TABLE account_pace`);
  }
}
