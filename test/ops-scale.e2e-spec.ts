import { AsyncLocalStorage } from 'node:async_hooks';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Client } from 'pg';
import request from 'supertest';
import { RetentionJob } from '../src/retention/retention';
import { Database } from '../src/database/database';
import { OPS_METRICS_INTERVAL } from '../src/ops/ops-metrics.service';
import { HEALTH_SQL, OpsService } from '../src/ops/ops.service';
import type { TestApp } from './support/app';
import { DispatchWorker } from '../src/reward-dispatch/dispatch.worker';
import { ApprovalReconciler } from '../src/reward-dispatch/approval.reconciler';
import { DeliveryReconciler } from '../src/delivery-webhooks/delivery-reconciler';
import { WebhookWorker } from '../src/tenant-webhooks/webhook.worker';
import { startTestApp } from './support/app';
import { op } from './support/connect';
import { sqlOn } from './support/database';

const N = 10_000;

interface Page {
  connections: {
    id: string;
    tenant_id: string;
    status: string;
    health: string | null;
    dispatches_24h: { sent: number; failed: number; queued: number };
  }[];
  next_cursor: string | null;
  next_offset: number | null;
}

/** The list's order as the API documents it, written plainly: the oracle the pages are compared with. */
const ORACLE_ORDER = `CASE c.status WHEN 'needs_reauth' THEN 0 WHEN 'error' THEN 1 WHEN 'active' THEN 2 ELSE 3 END,
  c.consecutive_failures DESC, c.last_error_at DESC NULLS LAST, c.tenant_id, c.id`;

describe('ops list at scale: keyset paging in urgency order from an index; metrics from a snapshot', () => {
  let t: TestApp;
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const get = async (query: string): Promise<Page> =>
    (await request(t.baseUrl).get(`/v1/ops/connections?${query}`).set(op).expect(200)).body as Page;

  /** Every id the list returns for `filters`, page by page with the cursor; checks each page on the way. */
  async function walk(filters: string, limit: number): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; ; pages++) {
      const page = await get(
        `${filters}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(page.connections.length).toBeLessThanOrEqual(limit);
      ids.push(...page.connections.map((c) => c.id));
      if (page.next_cursor === null) {
        expect(page.next_offset).toBeNull();
        return ids;
      }
      expect(page.connections).toHaveLength(limit);
      expect(page.next_offset).toBe(ids.length);
      cursor = page.next_cursor;
      if (pages > 1_000) throw new Error('paging does not end');
    }
  }

  async function oracle(where: string, params: unknown[] = []): Promise<string[]> {
    // $1 is the idle threshold of HEALTH_SQL.
    const rows = await sql(
      `SELECT c.id FROM connections c WHERE $1::float8 > 0 AND ${where} ORDER BY ${ORACLE_ORDER}`,
      [t.config.ops.idleAfterMs, ...params],
    );
    return rows.map((r) => r.id as string);
  }

  beforeAll(async () => {
    t = await startTestApp({ OPS_PROBE_INTERVAL_MS: '0' });
    // 10,000 tenants with a sandbox connection, every 5th with a production one too, every 7th with a disconnected one
    // in its history; statuses, failure counts, errors (ties to the microsecond, and none) and probes mixed.
    await sql(
      `INSERT INTO tenants (id, name) SELECT 'scale-' || g, 'Scale tenant ' || g FROM generate_series(1, $1) g`,
      [N],
    );
    await sql(
      `INSERT INTO connections (tenant_id, environment, status, last_used_at, consecutive_failures, last_error_code, last_error_at, last_probe_ok, disconnected_at)
       SELECT 'scale-' || g, env, status,
              now() - (g % 48) * interval '1 hour',
              CASE WHEN status = 'error' THEN 1 + g % 4 WHEN g % 17 = 0 THEN 1 ELSE 0 END,
              CASE WHEN g % 11 = 0 OR g % 23 = 0 THEN 'upstream_unavailable' END,
              CASE WHEN g % 11 = 0 THEN timestamptz '2026-01-01 00:00:00.123456+00' + (g % 3) * interval '1 microsecond'
                   WHEN g % 23 = 0 THEN now() - g * interval '1 minute' END,
              CASE WHEN g % 29 = 0 THEN false END,
              CASE WHEN status = 'disconnected' THEN now() END
         FROM generate_series(1, $1) g,
              LATERAL (VALUES ('sandbox', CASE WHEN g % 97 = 0 THEN 'needs_reauth' WHEN g % 31 = 0 THEN 'error' ELSE 'active' END),
                              ('production', CASE WHEN g % 5 <> 0 THEN NULL WHEN g % 3 = 0 THEN 'error' ELSE 'active' END),
                              ('sandbox', CASE WHEN g % 7 = 0 THEN 'disconnected' END)) AS v(env, status)
        WHERE status IS NOT NULL`,
      [N],
    );
    // Ten dispatches per live sandbox connection over the last three days (the list counts the last 24 h).
    await sql(
      `INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, idempotency_key, request_hash, request, upstream_payload, status, order_shape, created_at)
       SELECT gen_random_uuid(), c.tenant_id, c.id, 'sandbox', 'k-' || c.id || '-' || i, repeat('0', 64), '{}', '{}',
              (ARRAY['sent', 'sent', 'failed', 'queued', 'sent'])[1 + i % 5], 'single', now() - (i * 7) * interval '1 hour'
         FROM connections c, generate_series(0, 9) i WHERE c.environment = 'sandbox' AND c.status <> 'disconnected'`,
    );
    await sql('ANALYZE');
  }, 120_000);

  afterAll(async () => {
    await t?.close();
  });

  it('pages every live connection exactly once, in urgency order, with the cursor', async () => {
    const expected = await oracle(`c.status <> 'disconnected'`);
    expect(expected.length).toBeGreaterThan(N);
    const ids = await walk('', 200);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expected);
  });

  it('pages with every filter, alone and together', async () => {
    const cases: [string, string, unknown[]][] = [
      ['status=needs_reauth', `c.status = 'needs_reauth'`, []],
      ['status=error', `c.status = 'error'`, []],
      ['status=active', `c.status = 'active'`, []],
      ['status=disconnected', `c.status = 'disconnected'`, []],
      ['environment=production', `c.status <> 'disconnected' AND c.environment = 'production'`, []],
      ['health=degraded', `c.status <> 'disconnected' AND ${HEALTH_SQL} = 'degraded'`, []],
      [
        'health=idle&environment=sandbox',
        `c.status <> 'disconnected' AND ${HEALTH_SQL} = 'idle' AND c.environment = 'sandbox'`,
        [],
      ],
      ['tenant=scale-35', `c.status <> 'disconnected' AND c.tenant_id = $2`, ['scale-35']],
      ['tenant=scale-35&status=disconnected', `c.status = 'disconnected' AND c.tenant_id = $2`, ['scale-35']],
      [
        'status=error&environment=production&health=degraded',
        `c.status = 'error' AND c.environment = 'production'`,
        [],
      ],
    ];
    for (const [filters, where, params] of cases) {
      const expected = await oracle(where, params);
      expect(expected.length).toBeGreaterThan(0);
      const ids = await walk(filters, expected.length > 500 ? 173 : 7);
      expect({ filters, ids }).toEqual({ filters, ids: expected });
    }
    // Ties to the microsecond on last_error_at, broken by tenant and id, one row a page.
    const ties = await oracle(
      `c.status = 'error' AND c.environment = 'sandbox' AND c.last_error_at < '2026-01-02'`,
    );
    expect(ties.length).toBeGreaterThan(20);
    const errors = await walk('status=error&environment=sandbox', 1);
    expect(errors).toEqual(await oracle(`c.status = 'error' AND c.environment = 'sandbox'`));
    expect(errors.filter((id) => ties.includes(id))).toEqual(ties);
  });

  it('keeps offset paging, and carries the filters and counts on each page', async () => {
    const expected = await oracle(`c.status <> 'disconnected' AND c.environment = 'production'`);
    const ids: string[] = [];
    for (let offset: number | null = 0; offset !== null;) {
      const page: Page = await get(`environment=production&limit=150&offset=${offset}`);
      ids.push(...page.connections.map((c) => c.id));
      expect(page.connections.every((c) => c.id && c.status !== 'disconnected')).toBe(true);
      offset = page.next_offset;
    }
    expect(ids).toEqual(expected);
    const first = await get('limit=50');
    expect(first.connections[0]).toMatchObject({ status: 'needs_reauth', health: 'broken' });
    const [withDispatches] = await sql(
      `SELECT count(*) FILTER (WHERE status = 'sent')::int AS sent, count(*) FILTER (WHERE status = 'failed')::int AS failed,
              count(*) FILTER (WHERE status IN ('queued', 'sending'))::int AS queued
         FROM reward_dispatches WHERE connection_id = $1 AND created_at > now() - interval '24 hours'`,
      [first.connections[0].id],
    );
    expect(first.connections[0].dispatches_24h).toEqual(withDispatches);
    expect(withDispatches.sent + withDispatches.failed + withDispatches.queued).toBeGreaterThan(0);
  });

  it('continues after the last row seen even when rows move or arrive (no repeats)', async () => {
    const first = await get('status=error&limit=10');
    const seen = new Set(first.connections.map((c) => c.id));
    // A row further down becomes the most urgent one, and a new one arrives at the top: offset paging would repeat a row.
    const [moved] = await sql(
      `SELECT c.id FROM connections c WHERE c.status = 'error' ORDER BY ${ORACLE_ORDER} OFFSET 40 LIMIT 1`,
    );
    await sql(`UPDATE connections SET consecutive_failures = 99 WHERE id = $1`, [moved.id]);
    await sql(`INSERT INTO tenants (id, name) VALUES ('aaa-new', 'New')`);
    await sql(
      `INSERT INTO connections (tenant_id, environment, status, consecutive_failures) VALUES ('aaa-new', 'sandbox', 'error', 100)`,
    );
    const second = await get(
      `status=error&limit=10&cursor=${encodeURIComponent(first.next_cursor as string)}`,
    );
    expect(second.connections.filter((c) => seen.has(c.id))).toEqual([]);
    const expected = await oracle(`c.status = 'error'`);
    const lastSeen = expected.indexOf(first.connections[9].id);
    expect(second.connections.map((c) => c.id)).toEqual(expected.slice(lastSeen + 1, lastSeen + 11));
    expect(second.connections.map((c) => c.id)).not.toContain(moved.id);
    await sql(
      `UPDATE connections SET consecutive_failures = 1 + (substring(tenant_id from 7)::int % 4) WHERE id = $1`,
      [moved.id],
    );
    await sql(`DELETE FROM tenants WHERE id = 'aaa-new'`);
  });

  it('refuses a cursor it did not issue, and a cursor with an offset', async () => {
    const page = await get('limit=5');
    for (const bad of [
      'x',
      'eyJhIjoxfQ',
      Buffer.from('[1,2,0,"1; DROP TABLE x","t","not-a-uuid",0]').toString('base64url'),
      'a'.repeat(600),
    ]) {
      const res = await request(t.baseUrl).get(`/v1/ops/connections?cursor=${bad}`).set(op).expect(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details[0].field).toBe('cursor');
    }
    const both = await request(t.baseUrl)
      .get(`/v1/ops/connections?offset=5&cursor=${page.next_cursor}`)
      .set(op)
      .expect(400);
    expect(both.body.error.details[0].field).toBe('offset');
  });

  it('reads a page from the urgency index, stopping after the page, and counts its dispatches from their index: one statement', async () => {
    // Every statement the listing issues (and only those: background work shares the pool).
    const pool = t.app.get(Database).main;
    const ops = t.app.get(OpsService);
    const listing = new AsyncLocalStorage<true>();
    const captured: { text: string; params: unknown[] }[] = [];
    const [query, list] = [pool.query.bind(pool), ops.list.bind(ops)];
    ops.list = (q) => listing.run(true, () => list(q));
    pool.query = ((text: string, params?: unknown[]) => {
      if (listing.getStore()) captured.push({ text, params: params ?? [] });
      return query(text, params);
    }) as typeof pool.query;
    try {
      const first = await get('limit=50');
      const deep = await get(
        `limit=50&cursor=${encodeURIComponent((await get('limit=50&offset=9000')).next_cursor as string)}`,
      );
      expect(deep.connections).toHaveLength(50);
      await get('status=active&limit=50');
      expect(first.connections).toHaveLength(50);
    } finally {
      pool.query = query;
      ops.list = list;
    }
    expect(captured).toHaveLength(4); // one statement a page
    const lists = captured;
    const client = new Client({ connectionString: t.databaseUrl });
    await client.connect();
    try {
      const plan = async (q: { text: string; params: unknown[] }) =>
        (
          (await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.text}`, q.params)).rows[0][
            'QUERY PLAN'
          ] as [{ Plan: PlanNode }]
        )[0].Plan;
      for (const q of [lists[0], lists[2], lists[3]]) {
        const nodes = flatten(await plan(q));
        const scan = nodes.find((n) => n['Index Name'] === 'connections_ops_urgency_idx');
        expect(scan).toBeDefined();
        expect(scan?.['Actual Rows']).toBeLessThanOrEqual(51); // the scan stops after the page (limit + 1)
        // No sort of connections beyond the page (the grouping sorts only the page's dispatches), no whole-table scan.
        const sorts = nodes.filter(
          (n) =>
            /Sort/.test(n['Node Type']) && !n['Sort Key']?.every((k) => k.startsWith('reward_dispatches.')),
        );
        expect(sorts.filter((n) => (n['Actual Rows'] ?? 0) > 51)).toEqual([]);
        expect(nodes.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
        expect(nodes.some((n) => n['Index Name'] === 'reward_dispatches_connection_idx')).toBe(true);
      }
    } finally {
      await client.end();
    }
  });

  it('serves the count gauges from a background snapshot: scrapes issue no query; refresh() shows changes', async () => {
    const scheduler = t.app.get(SchedulerRegistry);
    expect(scheduler.doesExist('interval', OPS_METRICS_INTERVAL)).toBe(true);
    const ops = t.app.get(OpsService);
    await ops.gauges.refresh();
    // Quiet the app's own background passes (worker, alerts, approvals, this snapshot), then count every query.
    for (const name of scheduler.getIntervals()) scheduler.deleteInterval(name);
    // The dispatch worker also claims again as each attempt ends (no poll delay), and the retention job runs on a timer
    // of its own: stop them too.
    await t.app.get(DispatchWorker).onModuleDestroy();
    await t.app.get(RetentionJob).onModuleDestroy();
    // The other claimers too: a pass already under way, or one asked for by another path, then claims nothing.
    await t.app.get(WebhookWorker).onModuleDestroy();
    await t.app.get(ApprovalReconciler).onModuleDestroy();
    await t.app.get(DeliveryReconciler).onModuleDestroy();
    const queries: string[] = [];
    const clientQuery = Client.prototype.query;
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      queries.push(String((args[0] as { text?: string }).text ?? args[0]));
      return (clientQuery as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof clientQuery;
    // A pass already under way (an approval check waiting on the sandbox, a webhook claim going round again) ends on
    // its own: wait for 500 ms without a query (a loaded machine may take seconds), then count from zero.
    for (let quiet = 0, waited = 0; quiet < 500 && waited < 20_000; waited += 100) {
      const seen = queries.length;
      await new Promise((r) => setTimeout(r, 100));
      quiet = queries.length === seen ? quiet + 100 : 0;
    }
    queries.length = 0;
    const scrape = async () => (await request(t.baseUrl).get('/metrics').expect(200)).text;
    const value = (text: string, series: string) =>
      Number(new RegExp(`^${series.replace(/[{}()[\]."]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
    let before = '';
    try {
      for (let i = 0; i < 5; i++) before = await scrape();
      expect(queries).toEqual([]);
      await get('limit=1'); // the counter does see the app's queries
      expect(queries.length).toBeGreaterThan(0);
    } finally {
      Client.prototype.query = clientQuery;
    }
    const broken = 'rg_connections{status="needs_reauth",health="broken"}';
    const queued = 'rg_dispatches{status="queued"}';
    const n = value(before, broken);
    expect(n).toBe(
      (await sql(`SELECT count(*)::int AS n FROM connections WHERE status = 'needs_reauth'`))[0].n,
    );
    expect(value(before, queued)).toBe(
      (await sql(`SELECT count(*)::int AS n FROM reward_dispatches WHERE status = 'queued'`))[0].n,
    );
    expect(before).not.toContain('rg_dispatches{status="sent"}'); // settled ones: rg_dispatch_attempts_total
    expect(value(before, 'rg_rewards_pending_approval')).toBe(0);
    expect(value(before, 'rg_metrics_snapshot_age_seconds')).toBeLessThan(5);

    const [changed] = await sql(
      `UPDATE connections SET status = 'needs_reauth' WHERE id = (SELECT id FROM connections WHERE status = 'active' LIMIT 1) RETURNING id`,
    );
    expect(value(await scrape(), broken)).toBe(n); // served from memory until the next refresh
    await ops.gauges.refresh();
    const after = await scrape();
    expect(value(after, broken)).toBe(n + 1);
    expect(value(after, 'rg_metrics_snapshot_age_seconds')).toBeLessThan(1);
    await sql(`UPDATE connections SET status = 'active' WHERE id = $1`, [changed.id]);
  });
});

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Sort Key'?: string[];
  Plans?: PlanNode[];
}

function flatten(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(flatten)];
}
