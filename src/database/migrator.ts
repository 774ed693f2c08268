import { Client } from 'pg';
import { MIGRATIONS } from '../../migrations';
import { adminConnection } from './pg-pools';
import { type Sql, transaction } from './sql';

/** A migration: readable SQL, `up` and `down`, each run in its own transaction. */
export interface MigrationInterface {
  /** The class name: `<Name><13-digit timestamp>`, recorded in `typeorm_migrations` once applied. */
  readonly name: string;
  up(queryRunner: QueryRunner): Promise<void>;
  down(queryRunner: QueryRunner): Promise<void>;
}
export type QueryRunner = Sql;

/** Arbitrary, constant: serialises migrations across gateway replicas starting together. */
const MIGRATION_LOCK_ID = 7_240_151;

/**
 * Applies pending migrations in order, each in its own transaction with its row in `typeorm_migrations` (TypeORM's
 * table and format, so existing databases keep their history). Returns the names applied.
 */
export function runMigrations(url: string): Promise<string[]> {
  return underMigrationLock(url, async (db) => {
    const { rows } = await db.query<{ name: string }>('SELECT name FROM typeorm_migrations');
    const done = new Set(rows.map((r) => r.name));
    const applied: string[] = [];
    for (const migration of MIGRATIONS.map((M) => new M())) {
      if (done.has(migration.name)) continue;
      await transaction(db, async () => {
        await migration.up(db);
        await db.query('INSERT INTO typeorm_migrations ("timestamp", name) VALUES ($1, $2)', [
          Number(migration.name.slice(-13)),
          migration.name,
        ]);
      });
      applied.push(migration.name);
    }
    return applied;
  });
}

/** Reverts the last applied migration (`npm run migration:revert`); returns its name, or null when none is applied. */
export function revertLastMigration(url: string): Promise<string | null> {
  return underMigrationLock(url, async (db) => {
    const { rows } = await db.query<{ id: number; name: string }>(
      'SELECT id, name FROM typeorm_migrations ORDER BY id DESC LIMIT 1',
    );
    if (!rows.length) return null;
    const [last] = rows;
    const migration = MIGRATIONS.map((M) => new M()).find((m) => m.name === last.name);
    if (!migration) throw new Error(`the last applied migration, ${last.name}, is not part of this version`);
    await transaction(db, async () => {
      await migration.down(db);
      await db.query('DELETE FROM typeorm_migrations WHERE id = $1', [last.id]);
    });
    return last.name;
  });
}

/** One admin connection holding the migration lock (a session lock: released when the connection ends). */
async function underMigrationLock<T>(url: string, work: (db: Client) => Promise<T>): Promise<T> {
  const db = new Client(adminConnection(url));
  await db.connect();
  try {
    await db.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    await db.query(`CREATE TABLE IF NOT EXISTS typeorm_migrations (
      id          serial  PRIMARY KEY,
      "timestamp" bigint  NOT NULL,
      name        varchar NOT NULL
    )`);
    return await work(db);
  } finally {
    await db.end();
  }
}
