import type { Pool } from 'pg';
import { Database } from '../src/database/database';
import { createTestDatabase } from './support/database';

describe('Database', () => {
  let db: { url: string; drop: () => Promise<void> };
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('close() resolves only when every connection of every pool has closed', async () => {
    // A server stopped right after close() (the embedded Postgres on Ctrl-C) must find no session of ours left.
    const database = new Database({ url: db.url, maxConnections: 12 });
    const pools: Pool[] = [database.main, database.relaxed, database.lock];
    let connected = 0;
    let closed = 0;
    for (const pool of pools) {
      pool.on('connect', () => (connected += 1));
      pool.on('remove', () => (closed += 1));
    }
    // Several idle clients in each pool: concurrent queries that each hold a connection a moment.
    await Promise.all(pools.flatMap((pool) => [1, 2, 3].map(() => pool.query('SELECT pg_sleep(0.05)'))));
    expect(connected).toBeGreaterThanOrEqual(pools.length * 2);

    await database.close();
    expect(closed).toBe(connected);
  });
});
