import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { AppConfig, Settings } from './config/app-config';
import { ConfigValidationError, readSettings, resolveConfig } from './config/app-config';
import { ensureLocalSecrets } from './config/local-secrets';
import type { LocalSecretsOutcome } from './config/local-secrets';
import type { EmbeddedDatabase } from './database/embedded-postgres';
import { isAlive, startEmbeddedPostgres } from './database/embedded-postgres';
import { terminate } from './common/terminate';

export interface Runtime {
  config: AppConfig;
  secrets: LocalSecretsOutcome;
  embedded: EmbeddedDatabase | null;
}

/** Loads `.env` (when present), then reads the environment; on problems prints them all and exits 1. */
export function loadSettingsOrFail(): Settings {
  const envFile = path.resolve(process.cwd(), '.env');
  if (existsSync(envFile)) process.loadEnvFile(envFile);
  try {
    return readSettings(process.env);
  } catch (error) {
    if (error instanceof ConfigValidationError) {
      process.stderr.write(`${error.message}\nSee .env.example and docs/configuration.md.\n`);
      terminate(1);
    }
    throw error;
  }
}

/** The local secrets and (DATABASE_URL unset) the embedded Postgres, then the configuration resolved with them. */
export async function prepareRuntime(settings: Settings, log: (m: string) => void): Promise<Runtime> {
  const { secrets, files } = ensureLocalSecrets(settings);
  const embedded = settings.database.url ? null : await startEmbeddedPostgres(settings.dataDir, log);
  const config = resolveConfig(settings, { ...secrets, databaseUrl: embedded?.url });
  return { config, secrets: files, embedded };
}

/** One gateway per DATA_DIR with the embedded database; a lock left by a killed gateway is taken over. */
export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, 'gateway.pid');
  if (existsSync(file)) {
    const pid = Number(readFileSync(file, 'utf8'));
    if (pid !== process.pid && isAlive(pid)) {
      throw new Error(`another gateway (pid ${pid}) is running on ${dataDir}; stop it or set DATA_DIR`);
    }
  }
  writeFileSync(file, String(process.pid));
  return () => rmSync(file, { force: true });
}
