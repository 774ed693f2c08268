import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The vault canary: one row holding a known value encrypted with the vault (`v1:<keyId>:…`, the first key of
 * VAULT_KEYS when it was written or last rotated). Written at the first start after this migration; at every start
 * the configured keys must decrypt it, so a gateway with the wrong VAULT_KEYS refuses to start instead of failing on
 * every grant later. `vault:rotate` re-encrypts it with the new first key after the grants.
 */
export class VaultCanary1700000007000 implements MigrationInterface {
  name = 'VaultCanary1700000007000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE vault_canary (
        id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
        key_id text NOT NULL,
        ciphertext text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        rotated_at timestamptz
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE vault_canary`);
  }
}
