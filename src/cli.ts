import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { loadSettingsOrFail, prepareRuntime } from './bootstrap';
import type { AppConfig } from './config/app-config';
import { CLI_ACTOR } from './audit/audit-actions';
import { AuditLog } from './audit/audit-log.service';
import { AuditStore } from './audit/audit.store';
import { runInRequestContext } from './common/request-context';
import { systemClock } from './common/clock';
import { Database } from './database/database';
import { revertLastMigration, runMigrations } from './database/migrator';
import { terminate } from './common/terminate';

const USAGE = `Usage: npm run cli -- <command> [options]

Commands:
  migration:run                     apply pending migrations
  migration:revert                  revert the last applied migration
  operator-key:create --name NAME   create an operator API key (printed once)
  vault:generate-key [--id ID]      print a new VAULT_KEYS entry (id:base64 of 32 random bytes)
  vault:rotate                      re-encrypt every vault value, then the vault canary, with the first key of VAULT_KEYS

The database is DATABASE_URL, or the embedded one in DATA_DIR (a running gateway's is reused).`;

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

async function withDatabase<T>(fn: (config: AppConfig, db: Database) => Promise<T>): Promise<T> {
  const runtime = await prepareRuntime(loadSettingsOrFail(), () => undefined);
  const db = new Database(runtime.config.database);
  try {
    return await fn(runtime.config, db);
  } finally {
    await db.close();
    // A database this command started itself is stopped again; one a gateway runs is left alone.
    if (runtime.embedded && !runtime.embedded.adopted) await runtime.embedded.stop();
  }
}

function auditOf(db: Database): AuditLog {
  return new AuditLog(new AuditStore(db), db, systemClock);
}

async function main(args: string[]): Promise<number> {
  const [command] = args;
  switch (command) {
    case 'migration:run': {
      const applied = await withDatabase((config) => runMigrations(config.database.url));
      process.stdout.write(applied.length ? `Applied: ${applied.join(', ')}\n` : 'Nothing to apply.\n');
      return 0;
    }
    case 'migration:revert': {
      const reverted = await withDatabase((config) => revertLastMigration(config.database.url));
      process.stdout.write(reverted ? `Reverted: ${reverted}\n` : 'Nothing to revert.\n');
      return 0;
    }
    case 'operator-key:create': {
      const name = option(args, 'name');
      if (!name || name.length > 100) {
        process.stderr.write('operator-key:create needs --name NAME (1–100 characters)\n');
        return 2;
      }
      const key = await withDatabase(async (config, db) => {
        await runMigrations(config.database.url);
        const { createApiKey } = await import('./tenants/api-keys.service');
        return db.transaction(async (tx) => {
          const created = await createApiKey(tx, null, name);
          await auditOf(db).record(
            'api_key.created',
            {
              tenantId: null,
              target: { type: 'api_key', id: created.row.id },
              details: { name, operator: true },
            },
            tx,
          );
          return created.key;
        });
      });
      process.stdout.write(`Operator key "${name}" (shown once; only its hash is stored):\n${key}\n`);
      return 0;
    }
    case 'vault:generate-key': {
      // Today's date on the operator's wall clock names the key (a CLI run: no app, no Clock to move).
      const id = option(args, 'id') ?? `k${new Date().toISOString().slice(0, 10).replace(/-/g, '')}`;
      process.stdout.write(`${id}:${randomBytes(32).toString('base64')}\n`);
      return 0;
    }
    case 'vault:rotate': {
      const result = await withDatabase(async (config, db) => {
        const { rotateVault } = await import('./token-vault/vault-rotation');
        const { Vault } = await import('./token-vault/vault.service');
        const rotated = await rotateVault(db.main, new Vault(config.vaultKeys));
        // Many transactions (page by page, beside live gateways): recorded once, after the last one committed.
        await auditOf(db).recordCommitted('vault.key_rotated', {
          tenantId: null,
          target: { type: 'vault', id: rotated.keyId },
          details: {
            key_id: rotated.keyId,
            values: rotated.columns.reduce((n, c) => n + c.values, 0),
            rewritten: rotated.columns.reduce((n, c) => n + c.rewritten, 0),
            canary: rotated.canary,
          },
        });
        return rotated;
      });
      const canary = { rewritten: 're-encrypted', current: 'already current', written: 'written' }[
        result.canary
      ];
      const columns = result.columns.map((c) => `  ${c.column}: ${c.rewritten} of ${c.values}\n`).join('');
      process.stdout.write(
        `Re-encrypted with the current key "${result.keyId}" (rewritten of values):\n${columns}Vault canary ${canary}.\n`,
      );
      return 0;
    }
    default:
      process.stdout.write(`${USAGE}\n`);
      return command === undefined || command === 'help' || command === '--help' ? 0 : 2;
  }
}

// The CLI's context, as the pipeline sets one per request: its changes are recorded as the CLI's.
runInRequestContext({ requestId: null, clientAddress: null, actor: CLI_ACTOR }, () =>
  main(process.argv.slice(2)),
).then(
  (code) => terminate(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    terminate(1);
  },
);
