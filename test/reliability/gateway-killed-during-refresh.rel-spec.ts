import type { ChildProcess } from 'node:child_process';
import { Client } from 'pg';
import request from 'supertest';
import type { TestApp } from '../support/app';
import { startTestApp } from '../support/app';
import { connectTenant, control, createTenant, op } from '../support/connect';
import { type CallResult, startTokenWorker, workerEnv, workerRound } from '../support/workers';

const round = (worker: ChildProcess, connectionId: string, calls: number) =>
  workerRound(worker, connectionId, calls).then((r) => r.callers);

/** Gateway instances die (SIGKILL) in the middle of a refresh — one of them holding the lock. */
describe('reliability: gateway processes killed during refreshes', () => {
  let t: TestApp;
  let workers: ChildProcess[] = [];
  let connectionId: string;

  beforeAll(async () => {
    t = await startTestApp({ LOG_LEVEL: 'silent', OPS_PROBE_INTERVAL_MS: '0' });
    await control(t, '/reset');
    await control(t, '/settings', { access_token_ttl_seconds: 2 });
    await createTenant(t, 'mortal');
    connectionId = await connectTenant(t, 'mortal');
    workers = await Promise.all([0, 1, 2].map(() => startTokenWorker(workerEnv(t))));
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.send('exit');
    await new Promise((r) => setTimeout(r, 300));
    await t.close();
  });

  it('releases the lock with the dead process; the survivor refreshes once; nothing is revoked or wrongly broken', async () => {
    await new Promise((r) => setTimeout(r, 2_100)); // the 2-second token has expired
    // The token endpoint is slow and then fails (without consuming anything): the lock holder is mid-call when killed.
    await control(t, '/faults', { route: 'token', latency_ms: 1_500, status: 503, times: 1 });
    const pending = workers.map((w) => round(w, connectionId, 50).catch(() => [] as CallResult[]));
    await new Promise((r) => setTimeout(r, 500));
    const [survivor, ...doomed] = workers;
    for (const w of doomed) w.kill('SIGKILL');
    const survived = await pending[0];
    expect(survived).toHaveLength(50);
    // Whatever the survivor saw (a transient failure or success), the connection is not broken.
    const db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      const [row] = (await db.query(`SELECT status FROM connections WHERE id = $1`, [connectionId])).rows;
      expect(['active', 'error']).toContain(row.status);
      await db.query(`UPDATE connections SET backoff_until = NULL WHERE id = $1`, [connectionId]);
      // No lock is left behind by the dead processes.
      const locks = await db.query(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'grants' AND l.mode = 'RowShareLock'`,
      );
      expect(locks.rows[0].n).toBe(0);
    } finally {
      await db.end();
    }
    const again = await round(survivor, connectionId, 100);
    expect(again.filter((r) => r.status !== 200)).toEqual([]);
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    expect(stats.grants.at(-1)).toMatchObject({ revoked: false, refresh_count: 1 });
    const connection = await request(t.baseUrl).get('/v1/tenants/mortal/connection').set(op).expect(200);
    expect(connection.body.status).toBe('active');
  });
});
