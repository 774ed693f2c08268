import { escapeIdentifier, type Pool } from 'pg';
import { reencryptVaultCanary } from './vault-canary';
import { ENCRYPTED_COLUMNS, type Vault, type VaultField } from './vault.service';

/** Rows read per page: the rotation holds no lock and keeps no more than this in memory. */
export const PAGE_ROWS = 500;

type KeyedValue = Record<string, string | number> & { value: string };

/** What `vault:rotate` did: per column, how many values it re-encrypted, of how many the column now holds. */
export interface VaultRotation {
  keyId: string;
  columns: { column: string; rewritten: number; values: number }[];
  canary: 'rewritten' | 'current' | 'written';
}

/**
 * `vault:rotate`: every registered column, then the canary, re-encrypted with the first key, beside live gateways
 * (already running with that key first): pages in key order without locks, each value replaced by a compare-and-set
 * on the old ciphertext, so a value a gateway rewrites meanwhile is never overwritten. The canary goes last.
 */
export async function rotateVault(pool: Pool, vault: Vault, pageRows = PAGE_ROWS): Promise<VaultRotation> {
  const columns: VaultRotation['columns'] = [];
  for (const field of ENCRYPTED_COLUMNS) columns.push(await reencryptColumn(pool, vault, field, pageRows));
  const canary = await reencryptVaultCanary(pool, vault);
  return { keyId: vault.currentKeyId, columns, canary };
}

async function reencryptColumn(pool: Pool, vault: Vault, field: VaultField, pageRows: number) {
  const [table, column] = [escapeIdentifier(field.table), escapeIdentifier(field.column)];
  const keys = field.key.map(escapeIdentifier).join(', ');
  const params = (from: number) => field.key.map((_, i) => `$${from + i}`).join(', ');
  const stale = `${column} IS NOT NULL AND split_part(${column}, ':', 2) <> $1`;
  const name = `${field.table}.${field.column}`;
  let rewritten = 0;
  let after: unknown[] = [];
  for (;;) {
    const { rows }: { rows: KeyedValue[] } = await pool.query<KeyedValue>(
      `SELECT ${keys}, ${column} AS value FROM ${table}
        WHERE ${stale} ${after.length ? `AND (${keys}) > (${params(2)})` : ''} ORDER BY ${keys} LIMIT ${pageRows}`,
      [vault.currentKeyId, ...after],
    );
    for (const row of rows) {
      const key = field.key.map((k) => row[k]);
      let value: string;
      try {
        value = vault.reencrypt(field, key, row.value);
      } catch (error) {
        throw new Error(`${name} (${key.join(', ')}): ${(error as Error).message}`);
      }
      // No row: a gateway replaced the value meanwhile, with its own first key (checked below).
      const { rowCount } = await pool.query(
        `UPDATE ${table} SET ${column} = $1 WHERE (${keys}) = (${params(3)}) AND ${column} = $2`,
        [value, row.value, ...key],
      );
      rewritten += rowCount ?? 0;
    }
    if (rows.length < pageRows) break;
    after = field.key.map((k) => rows[rows.length - 1][k]);
  }
  const { rows } = await pool.query<{ total: number; stale: number }>(
    `SELECT count(*)::int AS total, (count(*) FILTER (WHERE ${stale}))::int AS stale
       FROM ${table} WHERE ${column} IS NOT NULL`,
    [vault.currentKeyId],
  );
  if (rows[0].stale > 0)
    throw new Error(
      `${name}: ${rows[0].stale} values were written under another key during the rotation; is every instance ` +
        `running with "${vault.currentKeyId}" first in VAULT_KEYS? Run vault:rotate again once they are.`,
    );
  return { column: name, rewritten, values: rows[0].total };
}
