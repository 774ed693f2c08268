import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { createApp } from '../src/app.factory';
import { parseConfig, parseVaultKeys } from '../src/config/app-config';
import { CANARY_PLAINTEXT, VaultKeyMismatchError } from '../src/token-vault/vault-canary';
import { Vault, VAULT_CANARY } from '../src/token-vault/vault.service';
import type { TestApp } from './support/app';
import { freePort, startTestAppOn, testEnv } from './support/app';
import { connectTenant, control, createTenant } from './support/connect';
import { createTestDatabase, sqlOn } from './support/database';
import { runSrc, waitForOutput } from './support/main-process';

const material = () => randomBytes(32).toString('base64');
const ALPHA = `alpha:${material()}`;
const BETA = `beta:${material()}`;
const ALPHA_IMPOSTOR = `alpha:${material()}`; // same id, other key material

/** Every base64 key of a VAULT_KEYS value (what must never be printed). */
const secretsOf = (...values: string[]) => values.flatMap((v) => v.split(',').map((e) => e.split(':')[1]));

/** vault:rotate's report for this database (one grant, one OAuth state), with how many of each were rewritten. */
const rotated = (rewritten: { grants: number; states: number }, canary: string) =>
  [
    'Re-encrypted with the current key "beta" (rewritten of values):',
    `  grants.access_token_enc: ${rewritten.grants} of 1`,
    `  grants.refresh_token_enc: ${rewritten.grants} of 1`,
    '  dispatch_rewards.link_enc: 0 of 0',
    `  oauth_states.code_verifier_enc: ${rewritten.states} of 1`,
    '  webhook_endpoints.secret_enc: 0 of 0',
    '  webhook_keys.private_key_enc: 0 of 0',
    canary,
  ].join('\n');

describe('security: the vault canary', () => {
  let db: { url: string; drop: () => Promise<void> };
  let a: TestApp; // VAULT_KEYS=alpha: wrote the data
  let b: TestApp | undefined; // VAULT_KEYS=beta,alpha: rotation in progress
  let connectionId: string;
  const sql = (text: string, params: unknown[] = []) => sqlOn(db.url, text, params);

  beforeAll(async () => {
    db = await createTestDatabase();
    // No delivery-webhook registration: its key would be one more vault value, or not, depending on timing.
    a = await startTestAppOn(db.url, {
      VAULT_KEYS: ALPHA,
      OPS_PROBE_INTERVAL_MS: '0',
      DELIVERY_WEBHOOKS_REGISTER: 'false',
    });
    await control(a, '/reset');
    await createTenant(a, 'canary-co');
    connectionId = await connectTenant(a, 'canary-co'); // a grant under alpha
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await db.drop();
  });

  it('the first start writes the canary: a known value encrypted with the first key', async () => {
    const [row] = await sql(`SELECT key_id, ciphertext FROM vault_canary`);
    expect(row.key_id).toBe('alpha');
    expect(row.ciphertext).toMatch(/^v1:alpha:/);
    expect(row.ciphertext).not.toContain(CANARY_PLAINTEXT);
    expect(new Vault(a.config.vaultKeys).open(VAULT_CANARY, row.ciphertext)).toBe(CANARY_PLAINTEXT);
    const ready = await request(a.baseUrl).get('/health/ready').expect(200);
    expect(ready.body.info.vault).toEqual({ status: 'up', key_id: 'alpha', rotation_pending: false });
  });

  it('start-up refuses VAULT_KEYS that cannot decrypt the canary: the process exits 1 naming the key ids, never key material', async () => {
    for (const [keys, reason] of [
      [BETA, /encrypted with key id "alpha", which is not configured \(configured key ids: "beta"\)/],
      [
        ALPHA_IMPOSTOR,
        /encrypted with key id "alpha", and the configured key "alpha" is different key material \(configured key ids: "alpha"\)/,
      ],
    ] as const) {
      const port = await freePort();
      const gateway = runSrc('main.ts', {
        DATABASE_URL: db.url,
        VAULT_KEYS: keys,
        OPERATOR_API_KEY: 'o'.repeat(30),
        DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-canary-')),
        PORT: String(port),
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
        OPS_PROBE_INTERVAL_MS: '0',
      });
      expect(await gateway.exited).toBe(1);
      const output = gateway.output();
      expect(output).toMatch(/Rewards Gateway failed to start: VAULT_KEYS cannot decrypt the vault canary/);
      expect(output).toMatch(reason);
      expect(output).not.toContain('is running at'); // it never listened
      for (const secret of secretsOf(ALPHA, BETA, ALPHA_IMPOSTOR)) expect(output).not.toContain(secret);
      await expect(fetch(`http://127.0.0.1:${port}/health/live`)).rejects.toThrow();
    }
  }, 120_000);

  it('the same refusal in-process: app.init() (what listen() runs first) rejects before the app listens', async () => {
    const config = parseConfig(
      testEnv({
        DATABASE_URL: db.url,
        VAULT_KEYS: BETA,
        PORT: '0',
        OPS_PROBE_INTERVAL_MS: '0',
        DELIVERY_WEBHOOKS_REGISTER: 'false',
      }),
    );
    const app = await createApp(config);
    try {
      const error = await app.init().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(VaultKeyMismatchError);
      expect((error as Error).message).toContain('"alpha"');
    } finally {
      await app.close().catch(() => undefined);
    }
  });

  it('rotation pending (a new key first, the old one after it) is a warning: the gateway starts, readiness says so', async () => {
    const port = await freePort();
    const gateway = runSrc('main.ts', {
      DATABASE_URL: db.url,
      VAULT_KEYS: `${BETA},${ALPHA}`,
      OPERATOR_API_KEY: 'o'.repeat(30),
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-canary-')),
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      OPS_PROBE_INTERVAL_MS: '0',
    });
    try {
      await waitForOutput(gateway, /is running at/);
      expect(gateway.output()).toMatch(
        /vault rotation pending: the data is under key \\"alpha\\", VAULT_KEYS starts with \\"beta\\"/,
      );
      const ready = await fetch(`http://127.0.0.1:${port}/health/ready`);
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { info: { vault: unknown } }).info.vault).toEqual({
        status: 'up',
        key_id: 'alpha',
        rotation_pending: true,
      });
    } finally {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
    // The same keys in-process (used by the next tests).
    b = await startTestAppOn(db.url, {
      VAULT_KEYS: `${BETA},${ALPHA}`,
      OPS_PROBE_INTERVAL_MS: '0',
      DELIVERY_WEBHOOKS_REGISTER: 'false',
    });
    const ready = await request(b.baseUrl).get('/health/ready').expect(200);
    expect(ready.body.info.vault).toEqual({ status: 'up', key_id: 'alpha', rotation_pending: true });
  });

  it('vault:rotate re-encrypts the grants and then the canary with the first key: the canary is current', async () => {
    const cli = runSrc(
      'cli.ts',
      {
        DATABASE_URL: db.url,
        VAULT_KEYS: `${BETA},${ALPHA}`,
        OPERATOR_API_KEY: 'o'.repeat(30),
        DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-cli-')),
      },
      ['vault:rotate'],
    );
    expect(await cli.exited).toBe(0);
    expect(cli.output()).toContain(rotated({ grants: 1, states: 1 }, 'Vault canary re-encrypted.'));
    const [row] = await sql(`SELECT key_id, ciphertext, rotated_at FROM vault_canary`);
    expect(row.key_id).toBe('beta');
    expect(row.rotated_at).not.toBeNull();
    const betaOnly = parseVaultKeys(BETA);
    expect(new Vault(betaOnly).open(VAULT_CANARY, row.ciphertext)).toBe(CANARY_PLAINTEXT);
    const [grant] = await sql(`SELECT access_token_enc FROM grants WHERE connection_id = $1`, [connectionId]);
    expect(grant.access_token_enc).toMatch(/^v1:beta:/);
    const ready = await request((b as TestApp).baseUrl)
      .get('/health/ready')
      .expect(200);
    expect(ready.body.info.vault).toEqual({ status: 'up', key_id: 'beta', rotation_pending: false });
    // Rotating again changes nothing.
    const again = runSrc(
      'cli.ts',
      {
        DATABASE_URL: db.url,
        VAULT_KEYS: `${BETA},${ALPHA}`,
        OPERATOR_API_KEY: 'o'.repeat(30),
        DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-cli-')),
      },
      ['vault:rotate'],
    );
    expect(await again.exited).toBe(0);
    expect(again.output()).toContain(rotated({ grants: 0, states: 0 }, 'Vault canary already current.'));
  }, 120_000);

  it('readiness fails (503, the error shape) on an instance whose keys no longer decrypt the canary', async () => {
    // `a` still runs with alpha only; the data moved to beta.
    const res = await request(a.baseUrl).get('/health/ready').expect(503);
    expect(res.headers['retry-after']).toBe('2');
    expect(res.body.error.code).toBe('not_ready');
    const vault = (res.body.error.details as { field: string; reason: string }[]).find(
      (d) => d.field === 'vault',
    );
    expect(vault?.reason).toMatch(
      /encrypted with key id "beta", which is not configured \(configured key ids: "alpha"\)/,
    );
    expect(JSON.stringify(res.body)).not.toContain(ALPHA.split(':')[1]);
    // and with alpha only, a new instance would not start any more.
    const port = await freePort();
    const gateway = runSrc('main.ts', {
      DATABASE_URL: db.url,
      VAULT_KEYS: ALPHA,
      OPERATOR_API_KEY: 'o'.repeat(30),
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-canary-')),
      PORT: String(port),
    });
    expect(await gateway.exited).toBe(1);
    expect(gateway.output()).toMatch(
      /key id "beta", which is not configured \(configured key ids: "alpha"\)/,
    );
  }, 120_000);

  it('an upgraded database (grants, no canary yet) is checked against a grant before the canary is written', async () => {
    await sql(`DELETE FROM vault_canary`);
    const port = await freePort();
    const wrong = runSrc('main.ts', {
      DATABASE_URL: db.url,
      VAULT_KEYS: ALPHA,
      OPERATOR_API_KEY: 'o'.repeat(30),
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-canary-')),
      PORT: String(port),
    });
    expect(await wrong.exited).toBe(1);
    expect(wrong.output()).toMatch(
      /VAULT_KEYS cannot decrypt the existing grants \(the newest is encrypted with key id "beta"; configured key ids: "alpha"\)/,
    );
    expect(await sql(`SELECT * FROM vault_canary`)).toEqual([]);
    const right = runSrc('main.ts', {
      DATABASE_URL: db.url,
      VAULT_KEYS: BETA,
      OPERATOR_API_KEY: 'o'.repeat(30),
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-canary-')),
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      OPS_PROBE_INTERVAL_MS: '0',
    });
    try {
      await waitForOutput(right, /is running at/);
      expect((await sql(`SELECT key_id FROM vault_canary`))[0].key_id).toBe('beta');
    } finally {
      right.child.kill('SIGTERM');
      await right.exited;
    }
  }, 120_000);
});
