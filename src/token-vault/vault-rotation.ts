import type { Pool } from 'pg';
import { inTransaction } from '../database/sql';
import { GrantStore } from './grant.store';
import type { VaultKey } from '../config/app-config';
import { VaultCipher } from './vault-cipher';
import { reencryptVaultCanary } from './vault-canary';

/**
 * Re-encrypts every grant with the current (first) vault key, row by row under a row lock, so it can run beside
 * live gateways: a refresh in flight simply waits for the row. Returns how many values were rewritten.
 */
export async function reencryptGrants(
  pool: Pool,
  vault: VaultCipher,
  grants = new GrantStore(),
): Promise<{ grants: number; rewritten: number }> {
  const { rows: ids } = await pool.query<{ connection_id: string }>(
    `SELECT connection_id FROM grants ORDER BY connection_id`,
  );
  let rewritten = 0;
  for (const { connection_id: id } of ids) {
    await inTransaction(pool, async (tx) => {
      const { rows } = await tx.query<{ access_token_enc: string; refresh_token_enc: string }>(
        `SELECT access_token_enc, refresh_token_enc FROM grants WHERE connection_id = $1 FOR UPDATE`,
        [id],
      );
      const row = rows[0];
      if (!row) return;
      const current = vault.currentKeyId;
      if (
        VaultCipher.keyIdOf(row.access_token_enc) === current &&
        VaultCipher.keyIdOf(row.refresh_token_enc) === current
      )
        return;
      const access = vault.encrypt(vault.decrypt(row.access_token_enc, `${id}/access`), `${id}/access`);
      const refresh = vault.encrypt(vault.decrypt(row.refresh_token_enc, `${id}/refresh`), `${id}/refresh`);
      await grants.reencrypt(tx, id, access, refresh);
      rewritten += 1;
    });
  }
  return { grants: ids.length, rewritten };
}

/**
 * `vault:rotate`: every grant, then the vault canary, re-encrypted with the first key. The canary goes last, so
 * "canary current" means the whole rotation finished (a failure half-way leaves it, and the start-up warning, as is).
 */
export async function reencryptVault(
  pool: Pool,
  keys: readonly VaultKey[],
  /** Other modules' encrypted values (LINK redemption links, PKCE verifiers): each returns how many it rewrote. */
  others: ((vault: VaultCipher) => Promise<number>)[] = [],
): Promise<{
  grants: number;
  rewritten: number;
  others: number;
  canary: 'rewritten' | 'current' | 'written';
  keyId: string;
}> {
  const vault = new VaultCipher(keys);
  const grants = await reencryptGrants(pool, vault);
  let rewrittenOthers = 0;
  for (const reencrypt of others) rewrittenOthers += await reencrypt(vault);
  // The canary goes last: "current" then means every value was re-encrypted.
  const canary = await reencryptVaultCanary(pool, vault, keys);
  return { ...grants, others: rewrittenOthers, canary, keyId: vault.currentKeyId };
}
