import { Client } from 'pg';
import request from 'supertest';
import type { TestApp } from '../support/app';
import { startTestApp } from '../support/app';
import { connectTenant, control, createTenant, op } from '../support/connect';
import { reward, send, waitFor } from '../support/send';

/** The rewards service flaps (5xx, 429, slow answers after doing the work) while tokens expire every 2 s. */
describe('reliability: the rewards service flapping', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      LOG_LEVEL: 'silent',
      DISPATCH_RETRY_BASE_MS: '100',
      DISPATCH_POLL_MS: '100',
      DISPATCH_UPSTREAM_TIMEOUT_MS: '800',
      DISPATCH_LEASE_MS: '4000',
      DISPATCH_MAX_ATTEMPTS: '60',
      OPS_PROBE_INTERVAL_MS: '0',
    });
    await control(t, '/reset');
    await createTenant(t, 'flappy');
    await connectTenant(t, 'flappy');
    await control(t, '/settings', { access_token_ttl_seconds: 2 });
  });
  afterAll(async () => {
    await t.close();
  });

  it('sends everything exactly once and never marks the connection broken', async () => {
    let flapping = true;
    const flapper = (async () => {
      let on = false;
      while (flapping) {
        on = !on;
        await request(t.baseUrl).delete('/sandbox/__control/faults');
        if (on) {
          await control(t, '/faults', { route: 'orders', status: 503, probability: 0.5 });
          await control(t, '/faults', { route: 'orders', status: 429, retry_after: 1, probability: 0.2 });
          await control(t, '/faults', { route: 'orders', delay_after_work_ms: 1_000, probability: 0.2 });
          await control(t, '/faults', { route: 'token', status: 503, probability: 0.5 });
          await control(t, '/faults', { route: 'fields', status: 502, probability: 0.5 });
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      await request(t.baseUrl).delete('/sandbox/__control/faults');
    })();
    const statuses: number[] = [];
    let n = 0;
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (n < 300) {
          const i = n++;
          const res = await send(t, 'flappy', `flap-${i}`, {
            funding_source_id: 'FSDEMOMAIN',
            rewards: [reward({ recipient: { name: `F${i}`, email: `f${i}@example.com` } })],
          });
          statuses.push(res.status);
        }
      }),
    );
    flapping = false;
    await flapper;
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    const db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      // Requests refused before a dispatch existed (503 while the token cooled down) are retried by the client.
      for (let i = 0; i < 300; i++) {
        const exists = (
          await db.query(`SELECT 1 FROM reward_dispatches WHERE idempotency_key = $1`, [`flap-${i}`])
        ).rowCount;
        if (!exists) {
          await waitFor(
            () =>
              send(t, 'flappy', `flap-${i}`, {
                funding_source_id: 'FSDEMOMAIN',
                rewards: [reward({ recipient: { name: `F${i}`, email: `f${i}@example.com` } })],
              }),
            (r) => r.status === 201 || r.status === 202,
            20_000,
          );
        }
      }
      await waitFor(
        async () =>
          (await db.query(`SELECT status, count(*)::int AS n FROM reward_dispatches GROUP BY 1`)).rows,
        (rows) => rows.length === 1 && rows[0].status === 'sent' && rows[0].n === 300,
        60_000,
      );
    } finally {
      await db.end();
    }
    const orders = (await request(t.baseUrl).get('/sandbox/__control/orders')).body.orders as {
      external_id: string;
    }[];
    expect(orders).toHaveLength(300);
    expect(new Set(orders.map((o) => o.external_id)).size).toBe(300);
    const connection = await request(t.baseUrl).get('/v1/tenants/flappy/connection').set(op).expect(200);
    expect(connection.body.status).not.toBe('needs_reauth');
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    expect(stats.grants.every((g: { revoked: boolean }) => !g.revoked)).toBe(true);
    await send(t, 'flappy', 'after-flapping', {
      funding_source_id: 'FSDEMOMAIN',
      rewards: [reward()],
    }).expect(201);
  });
});
