import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SchedulerRegistry } from '@nestjs/schedule';
import request from 'supertest';
import { AlertsService, SIGNATURE_HEADER, signAlert } from '../src/ops/alerts.service';
import { OpsService } from '../src/ops/ops.service';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import type { TestApp } from './support/app';
import { sqlOn } from './support/database';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward, send } from './support/send';

const SECRET = 'webhook-secret-for-tests-0123456789';

interface Received {
  body: string;
  signature: string;
}

/** A local alert receiver: fails the first `failFirst` deliveries with 500, records every request. */
async function startReceiver(
  failFirst: number,
): Promise<{ url: string; received: Received[]; close: () => Promise<void> }> {
  const received: Received[] = [];
  let failures = 0;
  const server: Server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ body, signature: String(req.headers[SIGNATURE_HEADER.toLowerCase()]) });
      if (failures < failFirst) {
        failures += 1;
        res.statusCode = 500;
      }
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe('ops: connection health, probes, alerts, metrics', () => {
  let t: TestApp;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);

  beforeAll(async () => {
    receiver = await startReceiver(2);
    t = await startTestApp({
      OPS_WEBHOOK_URL: receiver.url,
      OPS_WEBHOOK_SECRET: SECRET,
      OPS_PROBE_INTERVAL_MS: '0',
      OPS_IDLE_AFTER_MS: '3600000',
    });
    // The alert tests drive detection and delivery by hand and count what the receiver got: the background pass (every
    // 2 s) would race them for the claims, and on a loaded machine deliver after the count.
    t.app.get(SchedulerRegistry).deleteInterval('ops-alerts');
    await control(t, '/reset');
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it('lists connections by urgency with health, and shows one with its events', async () => {
    await createTenant(t, 'ok-co');
    await createTenant(t, 'broken-co');
    await createTenant(t, 'shaky-co');
    const okId = await connectTenant(t, 'ok-co');
    const brokenId = await connectTenant(t, 'broken-co');
    const shakyId = await connectTenant(t, 'shaky-co');
    await sql(
      `UPDATE connections SET status = 'needs_reauth', last_error_code = 'invalid_grant' WHERE id = $1`,
      [brokenId],
    );
    await sql(`UPDATE connections SET status = 'error', consecutive_failures = 3 WHERE id = $1`, [shakyId]);
    const list = await request(t.baseUrl).get('/v1/ops/connections').set(op).expect(200);
    const order = list.body.connections.map((c: { id: string }) => c.id);
    expect(order.indexOf(brokenId)).toBeLessThan(order.indexOf(shakyId));
    expect(order.indexOf(shakyId)).toBeLessThan(order.indexOf(okId));
    const byId = Object.fromEntries(
      list.body.connections.map((c: { id: string; health: string }) => [c.id, c.health]),
    );
    expect(byId).toMatchObject({ [okId]: 'healthy', [brokenId]: 'broken', [shakyId]: 'degraded' });
    const filtered = await request(t.baseUrl)
      .get('/v1/ops/connections?status=needs_reauth')
      .set(op)
      .expect(200);
    expect(filtered.body.connections.map((c: { id: string }) => c.id)).toEqual([brokenId]);
    const byTenant = await request(t.baseUrl)
      .get('/v1/ops/connections?tenant=ok-co&environment=sandbox')
      .set(op)
      .expect(200);
    expect(byTenant.body.connections).toHaveLength(1);
    const detail = await request(t.baseUrl).get(`/v1/ops/connections/${okId}`).set(op).expect(200);
    expect(detail.body).toMatchObject({
      id: okId,
      tenant_name: 'Tenant ok-co',
      health: 'healthy',
      dispatches_24h: { sent: 0, failed: 0, queued: 0 },
    });
    expect(detail.body.events.map((e: { type: string }) => e.type)).toEqual(['connected']);
    await request(t.baseUrl).get('/v1/ops/connections?health=sick').set(op).expect(400);
    await sql(
      `UPDATE connections SET status = 'active', consecutive_failures = 0, last_error_code = NULL WHERE id IN ($1, $2)`,
      [brokenId, shakyId],
    );
  });

  it('keeps the ops API to operators', async () => {
    const key = (await request(t.baseUrl).post('/v1/tenants/ok-co/api-keys').set(op).send({ name: 'svc' }))
      .body.key;
    const res = await request(t.baseUrl)
      .get('/v1/ops/connections')
      .set('Authorization', `Bearer ${key}`)
      .expect(403);
    expect(res.body.error.code).toBe('operator_key_required');
    await request(t.baseUrl).get('/ops').expect(401).expect('WWW-Authenticate', /Basic/);
    await request(t.baseUrl).get('/ops').auth('ops', key).expect(403);
    await request(t.baseUrl).get('/ops').auth('ops', t.config.operatorApiKey).expect(200);
  });

  it('probes a connection (check) and records success and failure; refresh goes through the lock', async () => {
    const id = (await request(t.baseUrl).get('/v1/tenants/ok-co/connection').set(op)).body.id;
    const ok = await request(t.baseUrl).post(`/v1/ops/connections/${id}/check`).set(op).expect(201);
    expect(ok.body.last_probe).toMatchObject({ ok: true, error: null });
    await control(t, '/faults', { route: 'organizations', status: 503, times: 1 });
    const bad = await request(t.baseUrl).post(`/v1/ops/connections/${id}/check`).set(op).expect(201);
    expect(bad.body).toMatchObject({ health: 'degraded', last_probe: { ok: false } });
    const refreshed = await request(t.baseUrl).post(`/v1/ops/connections/${id}/refresh`).set(op).expect(201);
    expect(refreshed.body.refresh_count).toBe(1);
    expect(refreshed.body.events.map((e: { type: string }) => e.type)).toEqual(
      expect.arrayContaining(['probe', 'token_refreshed']),
    );
    await request(t.baseUrl).post(`/v1/ops/connections/${id}/check`).set(op).expect(201);
  });

  it('shows each connection in the list exactly as its detail does (without the events)', async () => {
    const list = await request(t.baseUrl).get('/v1/ops/connections').set(op).expect(200);
    expect(
      list.body.connections.some(
        (c: { last_probe: unknown; refresh_count: number }) => c.last_probe && c.refresh_count > 0,
      ),
    ).toBe(true);
    for (const row of list.body.connections) {
      const { events: _events, ...detail } = (
        await request(t.baseUrl).get(`/v1/ops/connections/${row.id}`).set(op).expect(200)
      ).body;
      expect(row).toEqual(detail);
    }
  });

  it('probes idle connections in the background, one instance per connection', async () => {
    const id = (await request(t.baseUrl).get('/v1/tenants/shaky-co/connection').set(op)).body.id;
    await sql(
      `UPDATE connections SET last_used_at = now() - interval '2 hours', connected_at = now() - interval '2 hours', last_probe_at = NULL`,
    );
    const idle = await request(t.baseUrl).get(`/v1/ops/connections/${id}`).set(op).expect(200);
    expect(idle.body.health).toBe('idle');
    const ops = t.app.get(OpsService);
    const [a, b] = await Promise.all([ops.probeIdle(50), ops.probeIdle(50)]);
    const total = (await sql(`SELECT count(*)::int AS n FROM connections WHERE status <> 'disconnected'`))[0]
      .n as number;
    expect(a + b).toBe(total); // each idle connection claimed exactly once across the two passes
    const probes = await sql(
      `SELECT count(*)::int AS n FROM connection_events WHERE connection_id = $1 AND type = 'probe'`,
      [id],
    );
    expect(probes[0].n).toBe(1);
  });

  it('alerts once when a connection breaks and once when it recovers, signed, retried until delivered', async () => {
    const alerts = t.app.get(AlertsService);
    await alerts.detectTransitions(); // settle the initial states: no alerts for healthy connections
    const before = (await sql(`SELECT count(*)::int AS n FROM ops_alerts`))[0].n as number;
    await createTenant(t, 'fragile');
    const id = await connectTenant(t, 'fragile');
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    await request(t.baseUrl)
      .post(`/sandbox/__control/grants/${stats.grants.at(-1).id}/revoke`)
      .send({});
    await t.app
      .get(AccessTokenProvider)
      .forceRefresh(id)
      .catch(() => undefined);
    expect((await request(t.baseUrl).get(`/v1/ops/connections/${id}`).set(op)).body.health).toBe('broken');
    await Promise.all([alerts.detectTransitions(), alerts.detectTransitions(), alerts.detectTransitions()]);
    const broken = await sql(`SELECT kind FROM ops_alerts WHERE connection_id = $1`, [id]);
    expect(broken.map((r) => r.kind)).toEqual(['connection.broken']);

    // The receiver fails twice; delivery is retried with backoff until it succeeds.
    for (let i = 0; i < 3; i++) {
      await sql(`UPDATE ops_alerts SET next_attempt_at = now() WHERE delivered_at IS NULL`);
      await alerts.deliverDue();
    }
    const delivered = receiver.received.filter((r) => JSON.parse(r.body).connection_id === id);
    expect(delivered).toHaveLength(3);
    const last = delivered[2];
    const t0 = Number(/t=(\d+)/.exec(last.signature)?.[1]);
    expect(last.signature).toBe(signAlert(SECRET, last.body, t0));
    expect(JSON.parse(last.body)).toMatchObject({
      event: 'connection.broken',
      tenant_id: 'fragile',
      environment: 'sandbox',
      status: 'needs_reauth',
    });
    expect(
      (await sql(`SELECT delivered_at FROM ops_alerts WHERE connection_id = $1`, [id]))[0].delivered_at,
    ).not.toBeNull();

    // The tenant connects again: one recovery alert.
    await connectTenant(t, 'fragile');
    await alerts.detectTransitions();
    await alerts.detectTransitions();
    const all = await sql(`SELECT kind FROM ops_alerts ORDER BY id`);
    expect(all.slice(before).map((r) => r.kind)).toEqual(['connection.broken', 'connection.recovered']);
  });

  it('exposes Prometheus metrics after traffic', async () => {
    await send(t, 'ok-co', 'metrics-1', { funding_source_id: 'FSDEMOMAIN', rewards: [reward()] }).expect(201);
    await request(t.baseUrl).get('/v1/tenants/ok-co/fields').set(op).expect(200);
    await t.app.get(OpsService).gauges.refresh(); // the count gauges come from a snapshot (every 15 s in the background)
    const res = await request(t.baseUrl).get('/metrics').expect(200);
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    for (const series of [
      'rg_connections{status="active",health="healthy"}',
      'rg_connections{status="disconnected",health="none"}',
      'rg_token_refreshes_total{outcome="success"}',
      'rg_token_refreshes_total{outcome="invalid_grant"}',
      'rg_upstream_request_duration_seconds_bucket{le="0.05",route="POST /orders",status="200"}',
      'rg_upstream_request_duration_seconds_count{route="token",status="200"}',
      'rg_dispatches{status="queued"} 0\n',
      'rg_rewards_pending_approval 0\n',
      'rg_metrics_snapshot_age_seconds ',
      'rg_dispatch_attempts_total{outcome="sent"}',
      'rg_fields_cache_events_total{event="hit"}',
      'rg_fields_cache_events_total{event="miss"}',
      'rg_refresh_lock_wait_seconds_count',
      'rg_process_resident_memory_bytes',
    ]) {
      expect(res.text).toContain(series);
    }
    expect(res.text).not.toMatch(/sbx_(at|rt)_|tenant_id=/);
  });

  it('pages the dashboard, keeping the filters', async () => {
    await sql(
      `INSERT INTO tenants (id, name) SELECT 'bulk-' || g, 'Bulk ' || g FROM generate_series(1, 120) g`,
    );
    await sql(
      `INSERT INTO connections (tenant_id, environment, status) SELECT 'bulk-' || g, 'sandbox', 'active' FROM generate_series(1, 120) g`,
    );
    const first = await request(t.baseUrl)
      .get('/ops?environment=sandbox')
      .auth('ops', t.config.operatorApiKey)
      .expect(200);
    expect(first.text).toContain('rel="next" href="/ops?environment=sandbox&amp;offset=100"');
    expect((first.text.match(/<tr class="health-/g) ?? []).length).toBe(100);
    const second = await request(t.baseUrl)
      .get('/ops?environment=sandbox&offset=100')
      .auth('ops', t.config.operatorApiKey)
      .expect(200);
    expect(second.text).toContain('rows 101–');
    expect(second.text).toContain('rel="prev"');
    expect(second.text).not.toContain('rel="next"');
    await request(t.baseUrl).get('/ops?offset=-5').auth('ops', t.config.operatorApiKey).expect(400);
  });

  it('pages the API with a cursor: the same rows as offset paging, each once, most urgent first', async () => {
    const byCursor: { id: string; status: string }[] = [];
    let cursor: string | null = null;
    do {
      const res: request.Response = await request(t.baseUrl)
        .get(`/v1/ops/connections?environment=sandbox&limit=25${cursor ? `&cursor=${cursor}` : ''}`)
        .set(op)
        .expect(200);
      byCursor.push(...res.body.connections);
      cursor = res.body.next_cursor;
    } while (cursor);
    const byOffset: { id: string }[] = [];
    for (let offset: number | null = 0; offset !== null;) {
      const res: request.Response = await request(t.baseUrl)
        .get(`/v1/ops/connections?environment=sandbox&limit=40&offset=${offset}`)
        .set(op)
        .expect(200);
      byOffset.push(...res.body.connections);
      offset = res.body.next_offset;
    }
    const live = (
      await sql(`SELECT id FROM connections WHERE environment = 'sandbox' AND status <> 'disconnected'`)
    ).map((r) => r.id);
    expect(byCursor.map((c) => c.id)).toEqual(byOffset.map((c) => c.id));
    expect(new Set(byCursor.map((c) => c.id))).toEqual(new Set(live));
    expect(byCursor).toHaveLength(live.length);
    const ranks = byCursor.map((c) => ['needs_reauth', 'error', 'active'].indexOf(c.status));
    expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
  });
});
