import type { DataSource } from 'typeorm';
import { VaultCipher } from './vault-cipher';

/**
 * Re-encrypts every grant with the current (first) vault key, row by row under a row lock, so it can run beside
 * live gateways: a refresh in flight simply waits for the row. Returns how many values were rewritten.
 */
export async function reencryptGrants(db: DataSource, vault: VaultCipher): Promise<{ grants: number; rewritten: number }> {
  const ids = (await db.query(`SELECT connection_id FROM grants ORDER BY connection_id`)) as { connection_id: string }[];
  let rewritten = 0;
  for (const { connection_id: id } of ids) {
    await db.transaction(async (tx) => {
      const rows = (await tx.query(`SELECT access_token_enc, refresh_token_enc FROM grants WHERE connection_id = $1 FOR UPDATE`, [id])) as {
        access_token_enc: string;
        refresh_token_enc: string;
      }[];
      const row = rows[0];
      if (!row) return;
      const current = vault.currentKeyId;
      if (VaultCipher.keyIdOf(row.access_token_enc) === current && VaultCipher.keyIdOf(row.refresh_token_enc) === current) return;
      const access = vault.encrypt(vault.decrypt(row.access_token_enc, `${id}/access`), `${id}/access`);
      const refresh = vault.encrypt(vault.decrypt(row.refresh_token_enc, `${id}/refresh`), `${id}/refresh`);
      await tx.query(`UPDATE grants SET access_token_enc = $2, refresh_token_enc = $3, updated_at = now() WHERE connection_id = $1`, [id, access, refresh]);
      rewritten += 1;
    });
  }
  return { grants: ids.length, rewritten };
}
