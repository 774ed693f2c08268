import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

export class TenantsAndApiKeys1700000000000 implements MigrationInterface {
  name = 'TenantsAndApiKeys1700000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE tenants (
        id                        varchar(63)  PRIMARY KEY,
        name                      varchar(200) NOT NULL,
        return_urls               text[]       NOT NULL DEFAULT '{}',
        default_funding_source_id varchar(200),
        created_at                timestamptz  NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE api_keys (
        id           uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id    varchar(63)  REFERENCES tenants(id) ON DELETE CASCADE,
        name         varchar(100) NOT NULL,
        key_hash     char(64)     NOT NULL UNIQUE,
        prefix       varchar(16)  NOT NULL,
        created_at   timestamptz  NOT NULL DEFAULT now(),
        last_used_at timestamptz,
        revoked_at   timestamptz
      )`);
    await queryRunner.query(`CREATE INDEX api_keys_tenant_id_idx ON api_keys (tenant_id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE api_keys`);
    await queryRunner.query(`DROP TABLE tenants`);
  }
}
