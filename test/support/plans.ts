import { Client } from 'pg';
import { runMigrations } from '../../src/database/migrator';
import { createTestDatabase } from './database';

/** A statement to EXPLAIN: its SQL with `$n` parameters and values for them. */
export interface PlannedStatement {
  name: string;
  text: string;
  values: unknown[];
}

/**
 * Prepares each statement, EXPLAINs it with its values under `mode` (a custom or the generic plan) and returns, for
 * each whose plan scans `table` sequentially, its name and plan (none: every one reaches its rows by an index).
 */
export async function sequentialScans(
  client: Client,
  table: string,
  statements: PlannedStatement[],
  mode: 'force_custom_plan' | 'force_generic_plan',
): Promise<string[]> {
  const problems: string[] = [];
  await client.query(`SET plan_cache_mode = ${mode}`);
  for (const [i, s] of statements.entries()) {
    await client.query(`PREPARE planned_${i} AS ${s.text}`);
    const literals = s.values.map((v) =>
      v instanceof Date ? `'${v.toISOString()}'` : typeof v === 'number' ? String(v) : `'${String(v)}'`,
    );
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN EXECUTE planned_${i}(${literals.join(', ')})`,
    );
    await client.query(`DEALLOCATE planned_${i}`);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    if (new RegExp(`Seq Scan on ${table}\\b`).test(plan)) problems.push(`${s.name} (${mode}):\n${plan}`);
  }
  return problems;
}

/**
 * A migrated database of the test's own and a client on it, with autovacuum off on `table`: no statistics until the
 * test asks for them (ANALYZE). `close` ends the client and drops the database.
 */
export async function planDatabase(table: string): Promise<{ client: Client; close: () => Promise<void> }> {
  const db = await createTestDatabase();
  await runMigrations(db.url);
  const client = new Client({ connectionString: db.url });
  await client.connect();
  await client.query(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
  return {
    client,
    close: async () => {
      await client.end();
      await db.drop();
    },
  };
}
