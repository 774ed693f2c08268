import { DataSource } from 'typeorm';
import type { PostgresDataSourceOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions';
import { MIGRATIONS } from '../../migrations';
import { ENTITIES } from './entities';

/** Bounds every session: a transaction left idle (a stalled instance) cannot hold row locks for long. */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;

export function dataSourceOptions(url: string, poolSize = 20): PostgresDataSourceOptions {
  return {
    type: 'postgres',
    url,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'typeorm_migrations',
    synchronize: false,
    logging: false,
    extra: {
      max: poolSize,
      connectionTimeoutMillis: 5_000,
      application_name: 'rewards-gateway',
      options: `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
    },
  };
}

const MIGRATION_LOCK_ID = 7_240_151; // arbitrary, constant: serialises migrations across gateway replicas

/** Applies pending migrations under an advisory lock, so several replicas starting together do not collide. */
export async function runMigrations(url: string): Promise<string[]> {
  const ds = new DataSource({ ...dataSourceOptions(url, 2) });
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    const applied = await ds.runMigrations({ transaction: 'each' });
    return applied.map((m) => m.name);
  } finally {
    await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => undefined);
    await lock.release();
    await ds.destroy();
  }
}

/** Reverts the last applied migration (for `npm run migration:revert`). */
export async function revertLastMigration(url: string): Promise<void> {
  const ds = new DataSource({ ...dataSourceOptions(url, 2) });
  await ds.initialize();
  try {
    await ds.undoLastMigration({ transaction: 'each' });
  } finally {
    await ds.destroy();
  }
}
