import { randomBytes } from 'node:crypto';
import { Pool } from 'pg';
import request from 'supertest';
import type { VaultKey } from '../src/config/app-config';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import { rotateVault } from '../src/token-vault/vault-rotation';
import { ENCRYPTED_COLUMNS, VAULT_CANARY, Vault } from '../src/token-vault/vault.service';
import type { TestApp } from './support/app';
import { startTestAppOn } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { createTestDatabase, sqlOn } from './support/database';
import { reward, send, waitFor } from './support/send';

const K1: VaultKey = { id: 'k1', key: randomBytes(32) };
const K2: VaultKey = { id: 'k2', key: randomBytes(32) };
const keysEnv = (...keys: VaultKey[]) => ({
  VAULT_KEYS: keys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(','),
  OPS_PROBE_INTERVAL_MS: '0',
});
const TENANTS = ['vault-a', 'vault-b', 'vault-c', 'vault-d'];
const REGISTERED = [...ENCRYPTED_COLUMNS, VAULT_CANARY].map((f) => `${f.table}.${f.column}`).sort();

describe('the token vault at rest', () => {
  let db: { url: string; drop: () => Promise<void> };
  let t: TestApp;
  const connections: string[] = [];
  const sql = (text: string, params: unknown[] = []) => sqlOn(db.url, text, params);
  const restart = async (...keys: VaultKey[]) => {
    await t.close();
    t = await startTestAppOn(db.url, keysEnv(...keys));
  };
  const sendLink = (tenant: string, key: string) =>
    send(t, tenant, key, { rewards: [reward({ delivery: { method: 'LINK' } })] }).expect(201);

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await startTestAppOn(db.url, keysEnv(K1));
    await control(t, '/reset');
    for (const tenant of TENANTS) {
      await createTenant(t, tenant);
      connections.push(await connectTenant(t, tenant));
      await sendLink(tenant, `${tenant}-before`);
      await request(t.baseUrl)
        .post(`/v1/tenants/${tenant}/webhooks`)
        .set(op)
        .send({ url: 'http://127.0.0.1:9/rewards', events: ['connection.needs_reauth'] })
        .expect(201);
    }
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  /** Every value of a registered column decrypted by `vault` (throws if one does not); counts per column. */
  async function openEverything(vault: Vault): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const field of [...ENCRYPTED_COLUMNS, VAULT_CANARY]) {
      const rows = await sql(
        `SELECT ${[...field.key, field.column].join(', ')} FROM ${field.table} WHERE ${field.column} IS NOT NULL`,
      );
      for (const row of rows)
        vault.reencrypt(
          field,
          field.key.map((k) => row[k]),
          row[field.column],
        );
      counts[`${field.table}.${field.column}`] = rows.length;
    }
    return counts;
  }

  it('holds no token in plain text anywhere in the database', async () => {
    const token = await t.app.get(AccessTokenProvider).getAccessToken(connections[0]);
    let dump = '';
    for (const { table_name } of await sql(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`,
    ))
      dump += JSON.stringify(await sql(`SELECT * FROM "${table_name}"`));
    expect(dump).toContain('v1:k1:'); // the ciphertexts are there…
    expect(dump).not.toContain(token.token); // …the token is not
    expect(dump).not.toMatch(/sbx_(at|rt|code)_/);
  });

  it('declares every column of vault ciphertexts in the schema, so that rotation walks them all', async () => {
    // By name: every `*_enc` column, and the canary.
    const named = await sql(
      `SELECT table_name || '.' || column_name AS name FROM information_schema.columns
        WHERE table_schema = 'public' AND (column_name LIKE '%\\_enc' OR table_name = 'vault_canary' AND column_name = 'ciphertext')`,
    );
    expect(named.map((r) => r.name).sort()).toEqual(REGISTERED);
    // By content: any text or JSON column holding a value of the vault's format, whatever its name.
    const columns = await sql(
      `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'character', 'jsonb', 'json')`,
    );
    const holding: string[] = [];
    for (const { table_name, column_name } of columns) {
      const [found] = await sql(
        `SELECT EXISTS (SELECT 1 FROM "${table_name}" WHERE "${column_name}"::text ~ 'v1:[A-Za-z0-9_.-]+:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]{22}:') AS hit`,
      );
      if (found.hit) holding.push(`${table_name}.${column_name}`);
    }
    expect(holding.length).toBeGreaterThanOrEqual(5);
    expect(holding.filter((c) => !REGISTERED.includes(c))).toEqual([]);
  });

  it('rotates beside live refreshes, connects and sends; with the old key dropped, every value still decrypts', async () => {
    // Every instance runs with the new key first, then vault:rotate runs (the documented order).
    await restart(K2, K1);
    // Each refresh holds its grant's row lock across a slow token call, so rotation meets rows being rewritten.
    await control(t, '/faults', { route: 'token', latency_ms: 1_500 });
    const refreshes = connections.map((id) =>
      request(t.baseUrl).post(`/v1/ops/connections/${id}/refresh`).set(op),
    );
    const refreshed = Promise.all(refreshes.map((r) => r.then((res) => res.status)));
    // (The lock pool is small: a few refreshes hold their lock at a time, the others wait for a connection.)
    await waitFor(
      () => sql(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'idle in transaction'`),
      (rows) => rows[0].n >= 1,
    );
    const sends = TENANTS.flatMap((tenant) =>
      [1, 2, 3].map((i) => sendLink(tenant, `${tenant}-during-${i}`)),
    );
    const pool = new Pool({ connectionString: db.url, max: 2 });
    let rotation: Awaited<ReturnType<typeof rotateVault>>;
    try {
      [rotation] = await Promise.all([
        rotateVault(pool, new Vault([K2, K1]), 2), // two rows a page: keyset paging over several pages
        Promise.all(sends),
        createTenant(t, 'vault-late').then(() => connectTenant(t, 'vault-late')),
      ]);
    } finally {
      await pool.end();
    }
    expect(await refreshed).toEqual(connections.map(() => 201));
    await request(t.baseUrl).delete('/sandbox/__control/faults');
    expect(rotation.canary).toBe('rewritten');
    // At least one grant was being refreshed when rotation came to it: its compare-and-set left the new tokens alone.
    expect(rotation.columns.find((c) => c.column === 'grants.refresh_token_enc')?.rewritten).toBeLessThan(
      connections.length,
    );
    const byColumn = Object.fromEntries(rotation.columns.map((c) => [c.column, c]));
    expect(Object.keys(byColumn).sort()).toEqual(REGISTERED.filter((c) => c !== 'vault_canary.ciphertext'));
    expect(byColumn['dispatch_rewards.link_enc'].rewritten).toBeGreaterThanOrEqual(TENANTS.length);
    expect(byColumn['webhook_endpoints.secret_enc'].rewritten).toBe(TENANTS.length);

    // The old key goes: the gateway starts (the canary is current), refreshes, and shows every link.
    await restart(K2);
    for (const id of connections)
      await request(t.baseUrl).post(`/v1/ops/connections/${id}/refresh`).set(op).expect(201);
    for (const tenant of TENANTS) {
      const { body } = await request(t.baseUrl).get(`/v1/tenants/${tenant}/dispatches`).set(op).expect(200);
      expect(body.dispatches).toHaveLength(4);
      for (const { id } of body.dispatches as { id: string }[]) {
        const dispatch = await request(t.baseUrl)
          .get(`/v1/tenants/${tenant}/dispatches/${id}`)
          .set(op)
          .expect(200);
        expect(dispatch.body.rewards[0].delivery.link).toMatch(/^https?:\/\//);
      }
    }
    const counts = await openEverything(new Vault([K2]));
    expect(REGISTERED.filter((column) => !(counts[column] > 0))).toEqual([]);
    expect(
      await sql(`SELECT id, status FROM connections WHERE status NOT IN ('active', 'disconnected')`),
    ).toEqual([]);
  }, 120_000);
});
