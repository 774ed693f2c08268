import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import * as path from 'node:path';
import type { RuntimeFacts, Settings } from './app-config';
import { ConfigValidationError, parseVaultKeys } from './app-config';

/** Where each generated secret is kept (the banner names the file, never the secret). */
export interface LocalSecretsOutcome {
  operatorKeyFile?: string;
  vaultKeyFile?: string;
  sandboxClientFile?: string;
}

/**
 * The zero-configuration default: an unset OPERATOR_API_KEY or VAULT_KEYS, and the built-in sandbox's app credentials
 * when not configured (never the public demo values), are generated once into `$DATA_DIR` (mode 0600) and reused.
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

/** The secret kept in `file`, created (mode 0600) on first use. */
export function readOrCreate(file: string, create: () => string): string {
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const value = create();
  writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
  return value;
}
