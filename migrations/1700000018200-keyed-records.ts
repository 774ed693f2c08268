import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * `rg_keyed_records(jsonb)`: the elements of a JSON array, as `jsonb_array_elements`, but declared `ROWS 1` — for the
 * statements of src/reward-dispatch/dispatch.store.ts that take their keys from a JSON array parameter. Postgres
 * estimates a set-returning function's output at its declared rows (100 for `jsonb_to_recordset`); with that
 * estimate, a generic plan made while the tables are small (never analyzed: costed as 10 pages) joins the keys to a
 * sequential scan of the table, and keeps that plan as the table grows. At 1, reaching each key through its index
 * costs less than any scan, at every size. STRICT (a null array: no elements), which also keeps Postgres from inlining
 * the body in the calling statement (an inlined body would be estimated as `jsonb_array_elements`, 100 rows).
 */
export class KeyedRecords1700000018200 implements MigrationInterface {
  name = 'KeyedRecords1700000018200';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION rg_keyed_records(p_records jsonb) RETURNS SETOF jsonb
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE ROWS 1
        AS $$ SELECT jsonb_array_elements(p_records) $$`);
    await queryRunner.query(`
      CREATE FUNCTION rg_keyed(p_keys anyarray) RETURNS SETOF anyelement
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE ROWS 1
        AS $$ SELECT unnest(p_keys) $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION rg_keyed(anyarray)`);
    await queryRunner.query(`DROP FUNCTION rg_keyed_records(jsonb)`);
  }
}
