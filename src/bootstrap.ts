import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { AppConfig, Settings } from './config/app-config';
import { ConfigValidationError, readSettings, resolveConfig } from './config/app-config';
import { ensureLocalSecrets } from './config/local-secrets';
import type { LocalSecretsOutcome } from './config/local-secrets';
import type { EmbeddedDatabase } from './database/embedded-postgres';
import { startEmbeddedPostgres } from './database/embedded-postgres';
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

/**
 * Everything that must exist before the Nest app starts — the generated local secrets and, when DATABASE_URL is
 * unset, the embedded Postgres — and the configuration resolved with them.
 */
export async function prepareRuntime(settings: Settings, log: (m: string) => void): Promise<Runtime> {
  const { secrets, files } = ensureLocalSecrets(settings);
  const embedded = settings.database.url ? null : await startEmbeddedPostgres(settings.dataDir, log);
  const config = resolveConfig(settings, { ...secrets, databaseUrl: embedded?.url });
  return { config, secrets: files, embedded };
}

/**
 * One gateway per DATA_DIR when the database is embedded: a second `npm start` beside a running one is refused,
 * while a lock left by a killed gateway is taken over.
 */
export function lockDataDir(dataDir: string): () => void {
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

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // A killed process not yet reaped by its parent is a zombie: dead for our purposes.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}
