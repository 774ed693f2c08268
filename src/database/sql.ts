import type { Pool, PoolClient, QueryResultRow } from 'pg';
import type { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';

/** What a store runs its statements on: a pool, or a client inside a transaction (pg's own types). */
export interface Sql {
  query<R extends QueryResultRow = QueryResultRow>(
    text: string,
    values?: unknown[],
  ): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** TypeORM's own pg pool: the main pool of the connection budget (same connections as `DataSource.query`). */
export function mainPool(db: DataSource): Pool {
  return (db.driver as PostgresDriver).master as Pool;
}

/** Runs `work` in one transaction on a client of `pool`; rolls back on any error. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
