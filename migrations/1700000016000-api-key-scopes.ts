import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Scoped API keys and rotation (writer: src/tenants/api-keys.service.ts):
 * - `scopes`: what a tenant key may do (`rewards:send`, `rewards:read`, `connection:manage`, `webhooks:manage`). Keys
 *   created before scopes existed hold all four, so nothing changes for their callers. Operator keys have every scope
 *   whatever the column says.
 * - `expires_at`: the end of a rotated key's grace period (null: no expiry). Checked against the gateway's clock on
 *   every authentication, cached or not.
 * - `rotated_from`: on a successor, the key it replaced. The unique partial index makes rotation happen once per key,
 *   even when two rotations of the same key race.
 */
export class ApiKeyScopes1700000016000 implements MigrationInterface {
  name = 'ApiKeyScopes1700000016000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE api_keys
        ADD COLUMN scopes       text[]      NOT NULL
          DEFAULT '{rewards:send,rewards:read,connection:manage,webhooks:manage}',
        ADD COLUMN expires_at   timestamptz,
        ADD COLUMN rotated_from uuid`);
    await queryRunner.query(
      `CREATE UNIQUE INDEX api_keys_rotated_from_key ON api_keys (rotated_from) WHERE rotated_from IS NOT NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX api_keys_rotated_from_key`);
    await queryRunner.query(
      `ALTER TABLE api_keys DROP COLUMN rotated_from, DROP COLUMN expires_at, DROP COLUMN scopes`,
    );
  }
}
