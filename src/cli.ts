import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { loadConfigOrFail, prepareRuntime } from './bootstrap';
import { dataSourceOptions, revertLastMigration, runMigrations } from './database/data-source';
import { terminate } from './common/terminate';

const USAGE = `Usage: npm run cli -- <command> [options]

Commands:
  migration:run                     apply pending migrations
  migration:revert                  revert the last applied migration
  operator-key:create --name NAME   create an operator API key (printed once)
  vault:generate-key [--id ID]      print a new VAULT_KEYS entry (id:base64 of 32 random bytes)
  vault:rotate                      re-encrypt every grant and the vault canary with the first key of VAULT_KEYS

The database is DATABASE_URL, or the embedded one in DATA_DIR (a running gateway's is reused).`;

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

async function withDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const config = loadConfigOrFail();
  const runtime = await prepareRuntime(config, () => undefined);
  try {
    return await fn(config.databaseUrl as string);
  } finally {
    // A database this command started itself is stopped again; one a gateway runs is left alone.
    if (runtime.embedded && !runtime.embedded.adopted) await runtime.embedded.stop();
  }
}

async function main(args: string[]): Promise<number> {
  const [command] = args;
  switch (command) {
    case 'migration:run': {
      const applied = await withDatabase((url) => runMigrations(url));
      process.stdout.write(applied.length ? `Applied: ${applied.join(', ')}\n` : 'Nothing to apply.\n');
      return 0;
    }
    case 'migration:revert':
      await withDatabase((url) => revertLastMigration(url));
      process.stdout.write('Reverted the last migration.\n');
      return 0;
    case 'operator-key:create': {
      const name = option(args, 'name');
      if (!name || name.length > 100) {
        process.stderr.write('operator-key:create needs --name NAME (1–100 characters)\n');
        return 2;
      }
      const key = await withDatabase(async (url) => {
        await runMigrations(url);
        const ds = await new DataSource(dataSourceOptions(url, 2)).initialize();
        try {
          const { ApiKeyEntity } = await import('./tenants/entities/api-key.entity');
          const { hashApiKey } = await import('./tenants/api-keys.service');
          const plaintext = `rgo_${randomBytes(32).toString('base64url')}`;
          await ds
            .getRepository(ApiKeyEntity)
            .insert({ tenantId: null, name, keyHash: hashApiKey(plaintext), prefix: plaintext.slice(0, 8) });
          return plaintext;
        } finally {
          await ds.destroy();
        }
      });
      process.stdout.write(`Operator key "${name}" (shown once; only its hash is stored):\n${key}\n`);
      return 0;
    }
    case 'vault:generate-key': {
      const id = option(args, 'id') ?? `k${new Date().toISOString().slice(0, 10).replace(/-/g, '')}`;
      process.stdout.write(`${id}:${randomBytes(32).toString('base64')}\n`);
      return 0;
    }
    case 'vault:rotate': {
      const result = await withDatabase(async (url) => {
        const config = loadConfigOrFail();
        const ds = await new DataSource(dataSourceOptions(url, 2)).initialize();
        try {
          const { reencryptVault } = await import('./token-vault/vault-rotation');
          const { reencryptLinks } = await import('./reward-dispatch/dispatch.store');
          const { reencryptWebhookSecrets } = await import('./tenant-webhooks/webhook.store');
          const { reencryptWebhookKeys } = await import('./token-vault/webhook-key.store');
          const { PgStateStore } = await import('./connections/oauth-state.store');
          const { mainPool } = await import('./database/sql');
          const pool = mainPool(ds);
          return await reencryptVault(ds, config.vaultKeys, [
            (vault) => reencryptLinks(pool, vault),
            (vault) => PgStateStore.reencryptVerifiers(pool, vault),
            (vault) => reencryptWebhookSecrets(pool, vault),
            (vault) => reencryptWebhookKeys(pool, vault),
          ]);
        } finally {
          await ds.destroy();
        }
      });
      const canary = { rewritten: 're-encrypted', current: 'already current', written: 'written' }[
        result.canary
      ];
      process.stdout.write(
        `Re-encrypted ${result.rewritten} of ${result.grants} grants and ${result.others} other values (LINK links, PKCE verifiers, webhook secrets and keys) with the current key "${result.keyId}"; vault canary ${canary}.\n`,
      );
      return 0;
    }
    default:
      process.stdout.write(`${USAGE}\n`);
      return command === undefined || command === 'help' || command === '--help' ? 0 : 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => terminate(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    terminate(1);
  },
);
