import { DataSource } from 'typeorm';
import type { PostgresDataSourceOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions';
import { MIGRATIONS } from '../../migrations';
import { ENTITIES } from './entities';
import { IDLE_IN_TRANSACTION_TIMEOUT_MS, type PoolSettings, budgetDriver, poolConfig } from './pg-pools';

export { IDLE_IN_TRANSACTION_TIMEOUT_MS };

/**
 * A data source for admin work (migrations, the CLI): a couple of connections, no statement timeout (a migration may
 * run long), the idle-in-transaction bound of every session.
 */
export function dataSourceOptions(url: string, poolSize = 2): PostgresDataSourceOptions {
  return {
    type: 'postgres',
    url,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'typeorm_migrations',
    synchronize: false,
    logging: false,
    driver: budgetDriver,
    extra: poolConfig({ url, maxConnections: 5 }, 'main', {
      max: poolSize,
      application_name: 'rewards-gateway:admin',
      options: `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
    }),
  };
}

/** The gateway's main pool (TypeORM and the hot path's named statements): its share of the connection budget. */
export function appDataSourceOptions(settings: PoolSettings): PostgresDataSourceOptions {
  return { ...dataSourceOptions(settings.url), extra: poolConfig(settings, 'main') };
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
