import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The ops connection list (`GET /v1/ops/connections`, the `/ops` dashboard) in its order, most urgent first, from an
 * index: urgency rank (needs_reauth, error, active, disconnected), most consecutive failures, latest error (none
 * last), then tenant and id as the tiebreaker. Every key ascending and never NULL, so a page is an index range scan
 * that stops after `limit` rows and the next page starts at a row comparison (keyset pagination, `cursor`):
 * - `-consecutive_failures` is `consecutive_failures DESC`;
 * - `coalesce(extract(epoch FROM timestamptz 'epoch' - last_error_at), 'Infinity')` is `last_error_at DESC NULLS
 *   LAST`: minus the error's seconds since 1970, exact to the microsecond (interval arithmetic is immutable, unlike
 *   `extract(epoch FROM timestamptz)`), and no error sorts after every error.
 * Not partial: `status = 'disconnected'` is a range of it too (rank 3), and the live list stops before it.
 * `OpsService.list` writes the same expressions; `test/ops-scale.e2e-spec.ts` checks that its plan uses this index.
 */
export class OpsListIndex1700000006000 implements MigrationInterface {
  name = 'OpsListIndex1700000006000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE INDEX connections_ops_urgency_idx ON connections (
        (CASE status WHEN 'needs_reauth' THEN 0 WHEN 'error' THEN 1 WHEN 'active' THEN 2 ELSE 3 END),
        (-consecutive_failures),
        (coalesce(extract(epoch FROM timestamptz 'epoch' - last_error_at), 'Infinity')),
        tenant_id,
        id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX connections_ops_urgency_idx`);
  }
}
