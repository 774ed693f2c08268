import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Key lists the planner takes for what they are, a few keys (src/reward-dispatch/dispatch.store.ts):
 * - `rg_keyed_records(jsonb)`: the elements of a JSON array (`jsonb_array_elements`), for the records a statement
 *   takes as a JSON array parameter (the send path's grouped write);
 * - `rg_keyed(anyarray)`: the elements of an array (`unnest`), for keys a statement collected itself (the ctids
 *   retention locked).
 * Both are declared `ROWS 1`. Postgres estimates a set-returning function's output at its declared rows (100 for
 * `jsonb_to_recordset`, 10 for an array of unknown length) and Postgres 15 costs `= ANY(...)` of such a list at 10
 * index descents: a generic plan made while the tables are small (never analyzed: costed as 10 pages) then joins the
 * keys to a sequential scan of the table, and keeps that plan as the table grows. From one key, its index (or its
 * TID) is the cheapest path at every size. PL/pgSQL rather than SQL: never inlined into the calling statement (an
 * inlined body would be estimated as the built-in, and lose `ROWS 1`), and its plan is kept across calls (a SQL
 * function's body is planned again in every statement that calls it). STRICT: no array, no elements.
 */
export class KeyedRecords1700000018200 implements MigrationInterface {
  name = 'KeyedRecords1700000018200';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION rg_keyed_records(p_records jsonb) RETURNS SETOF jsonb
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE ROWS 1
        AS $$ BEGIN RETURN QUERY SELECT jsonb_array_elements(p_records); END $$`);
    await queryRunner.query(`
      CREATE FUNCTION rg_keyed(p_keys anyarray) RETURNS SETOF anyelement
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE ROWS 1
        AS $$ BEGIN RETURN QUERY SELECT unnest(p_keys); END $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION rg_keyed(anyarray)`);
    await queryRunner.query(`DROP FUNCTION rg_keyed_records(jsonb)`);
  }
}
