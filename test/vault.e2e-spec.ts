import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Database } from '../src/database/database';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import { VaultCipher } from '../src/token-vault/vault-cipher';
import { reencryptGrants } from '../src/token-vault/vault-rotation';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant } from './support/connect';

describe('the token vault at rest', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
    await control(t, '/reset');
  });
  afterAll(async () => {
    await t.close();
  });

  async function dumpEveryTable(): Promise<string> {
    const db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      const tables = await db.query(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`,
      );
      let dump = '';
      for (const { table_name } of tables.rows)
        dump += JSON.stringify((await db.query(`SELECT * FROM "${table_name}"`)).rows);
      return dump;
    } finally {
      await db.end();
    }
  }

  it('holds no token in plain text anywhere in the database', async () => {
    await createTenant(t, 'dumped');
    const id = await connectTenant(t, 'dumped');
    const token = await t.app.get(AccessTokenProvider).getAccessToken(id);
    const dump = await dumpEveryTable();
    expect(dump).toContain('v1:test1:'); // the ciphertexts are there…
    expect(dump).not.toContain(token.token); // …the token is not
    expect(dump).not.toMatch(/sbx_(at|rt|code)_/);
  });

  it('re-encrypts every grant with the new first key; the old key is then no longer needed', async () => {
    await createTenant(t, 'rotated');
    const id = await connectTenant(t, 'rotated');
    const newKey = { id: 'k2', key: randomBytes(32) };
    const pool = t.app.get(Database).main;
    const result = await reencryptGrants(pool, new VaultCipher([newKey, ...t.config.vaultKeys]));
    expect(result.rewritten).toBe(result.grants);
    expect(result.grants).toBeGreaterThanOrEqual(2);
    const again = await reencryptGrants(pool, new VaultCipher([newKey, ...t.config.vaultKeys]));
    expect(again.rewritten).toBe(0);
    const {
      rows: [row],
    } = await pool.query(`SELECT access_token_enc, refresh_token_enc FROM grants WHERE connection_id = $1`, [
      id,
    ]);
    const onlyNew = new VaultCipher([newKey]);
    expect(onlyNew.decrypt(row.access_token_enc, `${id}/access`)).toMatch(/^sbx_at_/);
    expect(() => new VaultCipher(t.config.vaultKeys).decrypt(row.refresh_token_enc, `${id}/refresh`)).toThrow(
      /unknown key id "k2"/,
    );
  });
});
