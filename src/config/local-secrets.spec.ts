import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { EMBEDDED_SANDBOX_CLIENT, parseConfig } from './app-config';
import { ensureLocalSecrets } from './local-secrets';

describe('the built-in sandbox’s app credentials', () => {
  it('are generated once per data dir (0600), never the public demo values, and reused on the next start', () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-secrets-'));
    const first = parseConfig({ DATA_DIR: dataDir });
    const outcome = ensureLocalSecrets(first);
    expect(first.rewards.sandbox?.clientId).not.toBe(EMBEDDED_SANDBOX_CLIENT.clientId);
    expect(first.rewards.sandbox?.clientSecret).not.toBe(EMBEDDED_SANDBOX_CLIENT.clientSecret);
    expect(first.rewards.sandbox?.clientSecret.length).toBeGreaterThanOrEqual(32);
    expect(statSync(outcome.sandboxClientFile as string).mode & 0o777).toBe(0o600);
    const again = parseConfig({ DATA_DIR: dataDir });
    ensureLocalSecrets(again);
    expect(again.rewards.sandbox).toMatchObject({
      clientId: first.rewards.sandbox?.clientId,
      clientSecret: first.rewards.sandbox?.clientSecret,
    });
    expect(readFileSync(outcome.sandboxClientFile as string, 'utf8')).toContain(
      first.rewards.sandbox?.clientId,
    );
  });

  it('are left alone when configured', () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-secrets-'));
    const config = parseConfig({
      DATA_DIR: dataDir,
      REWARDS_SANDBOX_CLIENT_ID: 'mine',
      REWARDS_SANDBOX_CLIENT_SECRET: 'my-secret-value',
    });
    expect(ensureLocalSecrets(config).sandboxClientFile).toBeUndefined();
    expect(config.rewards.sandbox).toMatchObject({ clientId: 'mine', clientSecret: 'my-secret-value' });
  });

  it('no sandbox at all on a production-only gateway, unless SANDBOX_ENABLED=true', () => {
    const production = {
      REWARDS_PRODUCTION_BASE_URL: 'https://rewards.example.com',
      REWARDS_PRODUCTION_CLIENT_ID: 'p',
      REWARDS_PRODUCTION_CLIENT_SECRET: 'p-secret',
    };
    expect(parseConfig(production)).toMatchObject({ mountSandbox: false, defaultEnvironment: 'production' });
    expect(parseConfig(production).rewards.sandbox).toBeUndefined();
    expect(parseConfig({ ...production, SANDBOX_ENABLED: 'true' }).mountSandbox).toBe(true);
    expect(() => parseConfig({ SANDBOX_ENABLED: 'false' })).toThrow(/no rewards environment is configured/);
  });
});
