import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import * as path from 'node:path';
import type { RuntimeFacts, Settings } from './app-config';
import { ConfigValidationError, parseVaultKeys } from './app-config';

/** Where each generated secret is kept (for the banner, which names the file, never the secret). */
export interface LocalSecretsOutcome {
  operatorKeyFile?: string;
  vaultKeyFile?: string;
  sandboxClientFile?: string;
}

/**
 * The zero-configuration default: when OPERATOR_API_KEY is unset, one is generated once into `$DATA_DIR` and
 * reused; when VAULT_KEYS is unset (only allowed with the embedded database), a vault key is generated the same
 * way; so are the built-in sandbox's app credentials when they are not configured (random per data dir, never the
 * public demo values). Files are created with mode 0600. Returns the secrets, for `resolveConfig`.
 */
export function ensureLocalSecrets(settings: Settings): {
  secrets: RuntimeFacts;
  files: LocalSecretsOutcome;
} {
  const secrets: RuntimeFacts = {};
  const files: LocalSecretsOutcome = {};
  const local = (name: string) => path.join(settings.dataDir, name);
  mkdirSync(settings.dataDir, { recursive: true });
  if (settings.operatorApiKey === undefined) {
    files.operatorKeyFile = local('operator-api-key');
    secrets.operatorApiKey = readOrCreate(
      files.operatorKeyFile,
      () => `rgo_${randomBytes(32).toString('base64url')}`,
    );
  }
  if (settings.sandboxClientUnset) {
    files.sandboxClientFile = local('sandbox-client');
    const [clientId, clientSecret] = readOrCreate(
      files.sandboxClientFile,
      () => `rg-sandbox-${randomBytes(6).toString('hex')}:${randomBytes(24).toString('base64url')}`,
    ).split(':');
    secrets.sandboxClient = { clientId, clientSecret };
  }
  if (settings.vaultKeys === undefined) {
    const file = (files.vaultKeyFile = local('vault-keys'));
    const raw = readOrCreate(file, () => `local1:${randomBytes(32).toString('base64')}`);
    try {
      secrets.vaultKeys = parseVaultKeys(raw);
    } catch (error) {
      throw new ConfigValidationError([`${file}: VAULT_KEYS ${(error as Error).message}`]);
    }
  }
  return { secrets, files };
}

function readOrCreate(file: string, create: () => string): string {
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const value = create();
  writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
  return value;
}
