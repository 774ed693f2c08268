import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { EMBEDDED_SANDBOX_CLIENT, readSettings, resolveConfig } from './app-config';
import { ensureLocalSecrets } from './local-secrets';

/** The configuration `npm start` resolves on an embedded database: the local secrets generated into DATA_DIR. */
function startConfig(env: Record<string, string>) {
  const settings = readSettings(env);
  const { secrets, files } = ensureLocalSecrets(settings);
  return { config: resolveConfig(settings, { ...secrets, databaseUrl: 'postgres://embedded/db' }), files };
}

describe('the local secrets of the embedded default', () => {
  it('are generated once per data dir (0600), never the public demo values, and reused on the next start', () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-secrets-'));
    const first = startConfig({ DATA_DIR: dataDir });
    const sandbox = first.config.rewards.sandbox;
    expect(sandbox?.clientId).not.toBe(EMBEDDED_SANDBOX_CLIENT.clientId);
    expect(sandbox?.clientSecret).not.toBe(EMBEDDED_SANDBOX_CLIENT.clientSecret);
    expect(sandbox?.clientSecret.length).toBeGreaterThanOrEqual(32);
    expect(first.config.operatorApiKey).toMatch(/^rgo_[A-Za-z0-9_-]{43}$/);
    expect(first.config.vaultKeys.map((k) => k.id)).toEqual(['local1']);
    for (const file of Object.values(first.files)) expect(statSync(file).mode & 0o777).toBe(0o600);
    const again = startConfig({ DATA_DIR: dataDir });
    expect(again.config.rewards.sandbox).toMatchObject({
      clientId: sandbox?.clientId,
      clientSecret: sandbox?.clientSecret,
    });
    expect(again.config.operatorApiKey).toBe(first.config.operatorApiKey);
    expect(again.config.vaultKeys).toEqual(first.config.vaultKeys);
    expect(readFileSync(first.files.sandboxClientFile as string, 'utf8')).toContain(sandbox?.clientId);
  });

  it('are left alone when configured', () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-secrets-'));
    const { config, files } = startConfig({
      DATA_DIR: dataDir,
      REWARDS_SANDBOX_CLIENT_ID: 'mine',
      REWARDS_SANDBOX_CLIENT_SECRET: 'my-secret-value',
      OPERATOR_API_KEY: `rgo_${'o'.repeat(40)}`,
    });
    expect(files).toEqual({ vaultKeyFile: path.join(dataDir, 'vault-keys') });
    expect(config.rewards.sandbox).toMatchObject({ clientId: 'mine', clientSecret: 'my-secret-value' });
    expect(config.operatorApiKey).toBe(`rgo_${'o'.repeat(40)}`);
  });

  it('no sandbox at all on a production-only gateway, unless SANDBOX_ENABLED=true', () => {
    const production = {
      REWARDS_PRODUCTION_BASE_URL: 'https://rewards.example.com',
      REWARDS_PRODUCTION_CLIENT_ID: 'p',
      REWARDS_PRODUCTION_CLIENT_SECRET: 'p-secret',
    };
    expect(readSettings(production)).toMatchObject({ mountSandbox: false, defaultEnvironment: 'production' });
    expect(readSettings(production).rewards.sandbox).toBeUndefined();
    expect(readSettings(production).sandboxClientUnset).toBe(false);
    expect(readSettings({ ...production, SANDBOX_ENABLED: 'true' }).mountSandbox).toBe(true);
    expect(() => readSettings({ SANDBOX_ENABLED: 'false' })).toThrow(/no rewards environment is configured/);
  });
});
