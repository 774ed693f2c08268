import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Failed-authentication counters shared by every instance (rate-limiter-flexible's Postgres store: its own schema,
 * created here so the library never runs DDL). Keys are `ip:<address>` and `prefix:<key prefix>`, never a key.
 */
export class AuthThrottle1700000008000 implements MigrationInterface {
  name = 'AuthThrottle1700000008000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE auth_failures (
        key     varchar(255) PRIMARY KEY,
        points  integer      NOT NULL DEFAULT 0,
        expire  bigint
      )`);
    // Which key prefixes exist (the negative cache of unknown prefixes asks this on a miss).
    await queryRunner.query(`CREATE INDEX api_keys_prefix_idx ON api_keys (prefix) WHERE revoked_at IS NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX api_keys_prefix_idx`);
    await queryRunner.query(`DROP TABLE auth_failures`);
  }
}
