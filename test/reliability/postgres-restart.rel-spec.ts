import { type ChildProcess, fork } from 'node:child_process';
import * as path from 'node:path';
import { Client } from 'pg';
import request from 'supertest';
import { createApp } from '../../src/app.factory';
import { parseConfig } from '../../src/config/app-config';
import { runMigrations } from '../../src/database/migrator';
import type { TestApp } from '../support/app';
import { freePort, testEnv } from '../support/app';
import { connectTenant, control, createTenant, op } from '../support/connect';
import { reward, send, waitFor } from '../support/send';

/** Postgres goes away for a few seconds in the middle of a stream of sends, then comes back. */
describe('reliability: Postgres restarted during traffic', () => {
  let pg: ChildProcess;
  let t: TestApp;
  const tell = (msg: string, reply: string) =>
    new Promise<void>((resolve) => {
      const on = (m: unknown) => {
        if (m === reply) {
          pg.off('message', on);
          resolve();
        }
      };
      pg.on('message', on);
      pg.send(msg);
    });

  beforeAll(async () => {
    pg = fork(path.join(__dirname, '../support/pg-control.mjs'), [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const { port } = await new Promise<{ port: number }>((resolve) =>
      pg.once('message', (m) => resolve(m as { port: number })),
    );
    const admin = new Client({ connectionString: `postgres://postgres:rel@127.0.0.1:${port}/postgres` });
    await admin.connect();
    await admin.query('CREATE DATABASE rel');
    await admin.end();
    const url = `postgres://postgres:rel@127.0.0.1:${port}/rel`;
    await runMigrations(url);
    const appPort = await freePort();
    const config = parseConfig(
      testEnv({
        DATABASE_URL: url,
        PORT: String(appPort),
        PUBLIC_BASE_URL: `http://127.0.0.1:${appPort}`,
        LOG_LEVEL: 'silent',
        DISPATCH_RETRY_BASE_MS: '100',
        DISPATCH_POLL_MS: '200',
        DISPATCH_LEASE_MS: '3000',
        DISPATCH_UPSTREAM_TIMEOUT_MS: '1000',
        OPS_PROBE_INTERVAL_MS: '0',
      }),
    );
    const app = await createApp(config);
    await app.listen(appPort, '127.0.0.1');
    t = {
      app,
      config,
      baseUrl: `http://127.0.0.1:${appPort}`,
      databaseUrl: url,
      logs: [],
      close: () => app.close(),
    };
    await control(t, '/reset');
    await createTenant(t, 'steady');
    await connectTenant(t, 'steady');
  }, 120_000);

  afterAll(async () => {
    await t?.close();
    pg.send('exit');
  });

  it('recovers on its own: readiness reflects the outage, nothing lost, nothing sent twice, no 500', async () => {
    const outcomes = new Map<string, number[]>();
    let stop = false;
    let n = 0;
    const callers = Array.from({ length: 4 }, async () => {
      while (!stop) {
        const key = `pg-${n++}`;
        const res = await send(t, 'steady', key, {
          funding_source_id: 'FSDEMOMAIN',
          rewards: [reward({ recipient: { name: key, email: `${key}@example.com` } })],
        });
        outcomes.set(key, [...(outcomes.get(key) ?? []), res.status]);
        await new Promise((r) => setTimeout(r, 20));
      }
    });
    await new Promise((r) => setTimeout(r, 1_000));
    await tell('stop', 'stopped');
    await waitFor(
      () => request(t.baseUrl).get('/health/ready'),
      (r) => r.status === 503,
      10_000,
    );
    await new Promise((r) => setTimeout(r, 2_000));
    await tell('start', 'started');
    await waitFor(
      () => request(t.baseUrl).get('/health/ready'),
      (r) => r.status === 200,
      30_000,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    stop = true;
    await Promise.all(callers);

    const statuses = [...outcomes.values()].flat();
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]); // never a 500
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThan(0); // the outage was felt
    // Clients retry (same key) what was not accepted; a key still in flight answers 409 until its lease ends.
    for (const [key, seen] of outcomes) {
      if (seen.some((s) => s === 201 || s === 202)) continue;
      const retried = await waitFor(
        () =>
          send(t, 'steady', key, {
            funding_source_id: 'FSDEMOMAIN',
            rewards: [reward({ recipient: { name: key, email: `${key}@example.com` } })],
          }),
        (r) => r.status === 201 || r.status === 202,
        20_000,
      );
      expect([201, 202]).toContain(retried.status);
    }
    const db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      await waitFor(
        async () =>
          (await db.query(`SELECT status, count(*)::int AS n FROM reward_dispatches GROUP BY 1`)).rows,
        (rows) => rows.length === 1 && rows[0].status === 'sent' && rows[0].n === outcomes.size,
        30_000,
      );
      const orders = (await request(t.baseUrl).get('/sandbox/__control/orders')).body.orders as {
        external_id: string;
      }[];
      expect(orders).toHaveLength(outcomes.size);
      expect(new Set(orders.map((o) => o.external_id)).size).toBe(outcomes.size);
    } finally {
      await db.end();
    }
    // Still serving, and the connection was never marked broken.
    await send(t, 'steady', 'after-restart', { funding_source_id: 'FSDEMOMAIN', rewards: [reward()] }).expect(
      201,
    );
    const connection = await request(t.baseUrl).get('/v1/tenants/steady/connection').set(op).expect(200);
    expect(connection.body.status).toBe('active');
  });
});
