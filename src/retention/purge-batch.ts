import type { Sql } from '../database/sql';

/**
 * The statements of the purges, built here and kept in each table's store: a DELETE of the rows whose key a subselect
 * of at most $2 rows picks, so that each batch reads an index range, never the whole table.
 */
export const batchDelete = {
  /** Among the $2 lowest ids, those whose `column` is before $1: ids increase with time, oldest first by the key. */
  oldest: (table: string, column: string) =>
    `DELETE FROM ${table} WHERE id = ANY (ARRAY(SELECT id FROM ${table} ORDER BY id LIMIT $2)) AND ${column} < $1`,
  /** At most $2 rows matching `where` (on $1). */
  matching: (table: string, key: string, where: string) =>
    `DELETE FROM ${table} WHERE ${key} = ANY (ARRAY(SELECT ${key} FROM ${table} WHERE ${where} LIMIT $2))`,
};

/** Runs a purge statement on `q` ($1 the cutoff or the tenant, $2 the batch size); returns the rows it removed. */
export async function purgeBatch(q: Sql, text: string, by: Date | string, limit: number): Promise<number> {
  return (await q.query(text, [by, limit])).rowCount ?? 0;
}
