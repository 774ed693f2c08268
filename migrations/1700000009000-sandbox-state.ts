import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The state of the rewards-service emulator mounted in the gateway (accounts, apps, codes, grants, tokens, orders,
 * rewards, settings) as one JSON document, so a restart of the demo keeps its tenants connected. One row (id = 1),
 * written only by src/sandbox/sandbox.store.ts.
 */
export class SandboxState1700000009000 implements MigrationInterface {
  name = 'SandboxState1700000009000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE sandbox_state (
        id        smallint    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
        state     jsonb       NOT NULL,
        saved_at  timestamptz
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE sandbox_state`);
  }
}
