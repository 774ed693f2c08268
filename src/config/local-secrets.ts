import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import * as path from 'node:path';
import type { AppConfig } from './app-config';
import { parseVaultKeys, ConfigValidationError } from './app-config';

export interface LocalSecretsOutcome {
  /** Where the generated operator key is kept, when it was generated or read from `$DATA_DIR`. */
  operatorKeyFile?: string;
  vaultKeyFile?: string;
  sandboxClientFile?: string;
}

/**
 * The zero-configuration default: when OPERATOR_API_KEY is unset, one is generated once into `$DATA_DIR` and
 * reused; when VAULT_KEYS is unset (only allowed with the embedded database), a vault key is generated the same
 * way. Files are created with mode 0600. Mutates `config` so the rest of the app sees a complete configuration.
 */
export function ensureLocalSecrets(config: AppConfig): LocalSecretsOutcome {
  const outcome: LocalSecretsOutcome = {};
  mkdirSync(config.dataDir, { recursive: true });
  if (!config.operatorApiKey) {
    const file = path.join(config.dataDir, 'operator-api-key');
    config.operatorApiKey = readOrCreate(file, () => `rgo_${randomBytes(32).toString('base64url')}`);
    outcome.operatorKeyFile = file;
  }
  const sandbox = config.rewards.sandbox;
  if (sandbox?.embedded && sandbox.generatedCredentials) {
    // The built-in sandbox's developer app: random per data dir, never the public demo values.
    const file = path.join(config.dataDir, 'sandbox-client');
    const [clientId, clientSecret] = readOrCreate(
      file,
      () => `rg-sandbox-${randomBytes(6).toString('hex')}:${randomBytes(24).toString('base64url')}`,
    ).split(':');
    sandbox.clientId = clientId;
    sandbox.clientSecret = clientSecret;
    outcome.sandboxClientFile = file;
  }
  if (config.vaultKeys.length === 0) {
    const file = path.join(config.dataDir, 'vault-keys');
    const raw = readOrCreate(file, () => `local1:${randomBytes(32).toString('base64')}`);
    const problems: string[] = [];
    config.vaultKeys = parseVaultKeys(raw, problems);
    if (problems.length) throw new ConfigValidationError(problems.map((p) => `${file}: ${p}`));
    outcome.vaultKeyFile = file;
  }
  return outcome;
}

function readOrCreate(file: string, create: () => string): string {
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const value = create();
  writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
  return value;
}
