import { MIGRATIONS } from '../migrations';
import { revertLastMigration, runMigrations } from '../src/database/migrator';
import { createTestDatabase, sqlOn } from './support/database';

const NAMES = MIGRATIONS.map((M) => new M().name);

describe('migrations', () => {
  let db: { url: string; drop: () => Promise<void> };
  const tables = async () =>
    (
      await sqlOn(
        db.url,
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name COLLATE "C"`,
      )
    ).map((r) => r.table_name as string);

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('applies each migration once, in order, even when several gateways start together', async () => {
    const runs = await Promise.all([runMigrations(db.url), runMigrations(db.url), runMigrations(db.url)]);
    expect(runs.flat()).toEqual(NAMES);
    expect(await runMigrations(db.url)).toEqual([]);
    // The history as TypeORM kept it (its table and columns), so databases migrated before keep theirs.
    const history = await sqlOn(db.url, `SELECT "timestamp", name FROM typeorm_migrations ORDER BY id`);
    expect(history).toEqual(NAMES.map((name) => ({ timestamp: name.slice(-13), name })));
  });

  it('reverts every migration, last first, down to an empty schema, and applies them all again', async () => {
    const applied = await tables();
    for (const name of [...NAMES].reverse()) expect(await revertLastMigration(db.url)).toBe(name);
    expect(await revertLastMigration(db.url)).toBeNull();
    expect(await tables()).toEqual(['typeorm_migrations']);
    expect(await runMigrations(db.url)).toEqual(NAMES);
    expect(await tables()).toEqual(applied);
  });

  it('rolls a failing migration back whole, recording nothing', async () => {
    await revertLastMigration(db.url);
    const last = NAMES.at(-1) as string;
    // The last migration fails after its own statements ran (its final one collides with an existing table): none of
    // them stays, and it is not recorded.
    const before = await tables();
    await sqlOn(db.url, `CREATE TABLE rg_test_blocker (id int)`);
    const original = MIGRATIONS.at(-1) as (typeof MIGRATIONS)[number];
    const up = original.prototype.up;
    original.prototype.up = async function (this: unknown, q) {
      await up.call(this, q);
      await q.query(`CREATE TABLE rg_test_blocker (id int)`);
    };
    try {
      await expect(runMigrations(db.url)).rejects.toThrow(/rg_test_blocker/);
    } finally {
      original.prototype.up = up;
    }
    expect(await tables()).toEqual([...before, 'rg_test_blocker'].sort());
    expect(
      await sqlOn(db.url, `SELECT count(*)::int AS n FROM typeorm_migrations WHERE name = $1`, [last]),
    ).toEqual([{ n: 0 }]);
    await sqlOn(db.url, `DROP TABLE rg_test_blocker`);
    expect(await runMigrations(db.url)).toEqual([last]);
  });
});
