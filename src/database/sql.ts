import type { Pool, PoolClient, QueryResultRow } from 'pg';

/** What a store runs its statements on: a pool, or a client inside a transaction (pg's own types). */
export interface Sql {
  query<R extends QueryResultRow = QueryResultRow>(
    text: string,
    values?: unknown[],
  ): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** Runs `work` in one transaction on a client of `pool`; rolls back on any error. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await transaction(client, () => work(client));
  } finally {
    client.release();
  }
}

/** Runs `work` in one transaction on a connection already held; rolls back on any error. */
export async function transaction<T>(client: Sql, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
