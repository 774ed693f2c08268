/**
 * Bench sections "history" and "purge": the send path's cost with a large history, and during a retention purge.
 *
 * - `history`: two gateways on two databases of the same server, one empty, one with 1,000,000 dispatches of history
 *   over 1,000 tenants seeded by SQL (seconds; never analyzed by the bench). Send load on each in turn, the order
 *   rotating, `BENCH_HISTORY_WINDOW` s (default 30) × `BENCH_HISTORY_ROUNDS` (default 2) each: throughput, gateway
 *   and Postgres CPU per send, p99, and the sequential scans of the dispatch tables during the load.
 * - `purge`: one gateway (retention off) on a database holding 1,000,000 settled dispatches 500 days old, and a second
 *   instance whose retention job deletes them; send load on the first in windows of `BENCH_PURGE_WINDOW` s (default
 *   30), `BENCH_PURGE_ROUNDS` (default 3) with the purger running and as many with it paused, in turn: p99 during the
 *   purge against without, and the rows the purge removed per second under that load.
 */
import type { ChildProcess } from 'node:child_process';
import { Client } from 'pg';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
import type { LoadResult } from './bench';

type Load = LoadResult & { cpu: Record<string, number> };

export interface HistoryDeps {
  /** The bench server's URL of its main database (another database name is put in its path). */
  pgUrl: string;
  log(message: string): void;
  /** Starts a gateway on `dbUrl` with extra environment; returns its URL and process. */
  gateway(dbUrl: string, env?: Record<string, string>): Promise<{ url: string; process: ChildProcess }>;
  connect(gateway: string, tenant: string): Promise<string>;
  /** Send load on `url` for `seconds` (idempotency keys with `prefix`), with the CPU per send of `pid` and Postgres. */
  send(url: string, pid: number, prefix: string, seconds: number): Promise<Load>;
  /** The same on several gateways at once, `rate` requests/s in all (unset: as fast as answered); CPU over `pids`. */
  sendAll(urls: string[], pids: number[], prefix: string, seconds: number, rate?: number): Promise<Load>;
  rssMb(pid: number): number;
}

const TENANTS = 1_000;
const HISTORY = 1_000_000;

async function sql(url: string, text: string, params: unknown[] = []): Promise<Json[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows;
  } finally {
    await c.end();
  }
}

async function createDatabase(deps: HistoryDeps, name: string): Promise<string> {
  await sql(deps.pgUrl, `DROP DATABASE IF EXISTS ${name}`);
  await sql(deps.pgUrl, `CREATE DATABASE ${name}`);
  const u = new URL(deps.pgUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * `HISTORY` settled dispatches of one reward each over `TENANTS` tenants, created `ageSql` ago (an SQL expression of
 * `g`, 1..HISTORY), with their rewards: two INSERT … SELECT generate_series statements. Returns the seconds it took.
 */
async function seed(dbUrl: string, ageSql: string, count = HISTORY): Promise<number> {
  const t0 = performance.now();
  await sql(
    dbUrl,
    `INSERT INTO tenants (id, name) SELECT 'hist-' || n, 'History ' || n FROM generate_series(1, ${TENANTS}) n`,
  );
  await sql(
    dbUrl,
    `INSERT INTO reward_dispatches (id, tenant_id, environment, order_shape, idempotency_key, request_hash, request,
                                    upstream_payload, status, attempts, response_status, reward_count, priority,
                                    created_at, updated_at, sent_at)
     SELECT md5('d' || g)::uuid, 'hist-' || (1 + g % ${TENANTS}), 'sandbox', 'single', 'key-' || g, repeat('0', 64),
            '{"external_reference": null, "funding_source_id": "FSDEMOMAIN",
              "custom_fields": [[{"id": "FLDDEPARTMENT", "label": "Department", "value": "Sales"}]]}',
            '{"payment": {"funding_source_id": "FSDEMOMAIN"}}', 'sent', 1, 201, 1, 0, a.at, a.at, a.at
       FROM generate_series(1, ${count}) g, LATERAL (SELECT now() - (${ageSql}) AS at) a`,
  );
  await sql(
    dbUrl,
    `INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload, attempts, upstream_order_id,
                                   upstream_reward_id, upstream_order_status, delivery_method, delivery_status,
                                   delivery_state, sent_at, updated_at)
     SELECT md5('d' || g)::uuid, 0, md5('d' || g)::uuid || '-r0', 'sent',
            jsonb_build_object('value', '{"denomination": 5, "currency_code": "USD"}'::jsonb,
                               'delivery', '{"method": "EMAIL"}'::jsonb,
                               'recipient', jsonb_build_object('name', 'History ' || g, 'email', 'h' || g || '@example.com'),
                               'products', '["PRODAMAZONUS"]'::jsonb,
                               'custom_fields', '[{"id": "FLDDEPARTMENT", "value": "Sales"}]'::jsonb),
            1, 'O' || g, 'R' || g, 'EXECUTED', 'EMAIL', 'DELIVERED', 'delivered', a.at, a.at
       FROM generate_series(1, ${count}) g, LATERAL (SELECT now() - (${ageSql}) AS at) a`,
  );
  return +((performance.now() - t0) / 1000).toFixed(1);
}

const seqScans = async (dbUrl: string) =>
  Object.fromEntries(
    (
      await sql(
        dbUrl,
        `SELECT relname, seq_scan::int AS n, n_live_tup::bigint AS live, coalesce(last_autoanalyze, last_analyze) AS analyzed
           FROM pg_stat_user_tables WHERE relname IN ('reward_dispatches', 'dispatch_rewards')`,
      )
    ).map((r) => [r.relname, { seq_scan: r.n, analyzed: r.analyzed !== null }]),
  );

const summary = (runs: Load[]) => ({
  rps: runs.map((r) => Math.round(r.rps)),
  gateway_cpu_ms_per_send: runs.map((r) => r.cpu.gateway),
  postgres_cpu_ms_per_send: runs.map((r) => r.cpu.postgres),
  p50_ms: runs.map((r) => r.p50),
  p99_ms: runs.map((r) => r.p99),
  errors: runs.reduce((n, r) => n + r.errors + r.non2xx, 0),
});

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const ratio = (a: number[], b: number[]) => +(mean(a) / mean(b)).toFixed(3);

export async function historyRun(deps: HistoryDeps, empty: { url: string; pid: number }): Promise<Json> {
  const window = Number(process.env.BENCH_HISTORY_WINDOW ?? 30);
  const rounds = Number(process.env.BENCH_HISTORY_ROUNDS ?? 2);
  const dbUrl = await createDatabase(deps, 'bench_history');
  const history = await deps.gateway(dbUrl);
  await deps.connect(history.url, 'bench');
  // History over the last 80 days: nothing for the gateway's own retention to remove during the load.
  const seconds = await seed(dbUrl, `(g::float8 / ${HISTORY}) * interval '80 days'`);
  deps.log(`history: ${HISTORY} dispatches over ${TENANTS} tenants seeded in ${seconds} s (not analyzed)`);
  const targets = [
    { name: 'empty', url: empty.url, pid: empty.pid },
    { name: 'history', url: history.url, pid: history.process.pid as number },
  ];
  for (const t of targets) await deps.send(t.url, t.pid, `${t.name}-warm`, 3);
  const scansBefore = await seqScans(dbUrl);
  const runs: Record<string, Load[]> = { empty: [], history: [] };
  for (let r = 0; r < rounds; r++)
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(r + k) % targets.length];
      const result = await deps.send(t.url, t.pid, `${t.name}-r${r}`, window);
      runs[t.name].push(result);
      deps.log(`history round ${r} ${t.name}: ${result.rps.toFixed(0)} req/s, ${JSON.stringify(result.cpu)}`);
    }
  const scansAfter = await seqScans(dbUrl);
  history.process.kill('SIGTERM');
  return {
    seeded: { dispatches: HISTORY, tenants: TENANTS, seconds },
    window_s: window,
    rounds,
    empty: summary(runs.empty),
    history: summary(runs.history),
    history_vs_empty: {
      rps: ratio(
        runs.history.map((r) => r.rps),
        runs.empty.map((r) => r.rps),
      ),
      gateway_cpu_per_send: ratio(
        runs.history.map((r) => r.cpu.gateway),
        runs.empty.map((r) => r.cpu.gateway),
      ),
      postgres_cpu_per_send: ratio(
        runs.history.map((r) => r.cpu.postgres),
        runs.empty.map((r) => r.cpu.postgres),
      ),
      p99: ratio(
        runs.history.map((r) => r.p99),
        runs.empty.map((r) => r.p99),
      ),
    },
    history_table_scans: { before_load: scansBefore, after_load: scansAfter },
  };
}

export async function purgeRun(deps: HistoryDeps): Promise<Json> {
  const window = Number(process.env.BENCH_PURGE_WINDOW ?? 30);
  const rounds = Number(process.env.BENCH_PURGE_ROUNDS ?? 3);
  const dbUrl = await createDatabase(deps, 'bench_purge');
  // The serving gateway removes nothing itself.
  const serving = await deps.gateway(dbUrl, {
    DISPATCH_RETENTION_DAYS: '0',
    RECIPIENT_DATA_RETENTION_DAYS: '0',
  });
  await deps.connect(serving.url, 'bench');
  const seconds = await seed(dbUrl, `interval '500 days' + g * interval '1 second'`);
  deps.log(
    `purge: ${HISTORY} settled dispatches 500 days old over ${TENANTS} tenants seeded in ${seconds} s`,
  );
  const pid = serving.process.pid as number;
  const left = async () =>
    Number(
      (await sql(dbUrl, `SELECT count(*)::int AS n FROM reward_dispatches WHERE tenant_id LIKE 'hist-%'`))[0]
        .n,
    );
  await deps.send(serving.url, pid, 'purge-warm', 3);
  // A second instance whose retention job starts within a second, paused (SIGSTOP) in the windows without a purge and
  // resumed (SIGCONT) in the others, in turn, the order rotating: both kinds of window meet the same machine.
  const purger = await deps.gateway(dbUrl, { RETENTION_INTERVAL_MS: '1000' });
  const purgerPid = purger.process.pid as number;
  process.kill(purgerPid, 'SIGSTOP');
  const runs: Record<'without' | 'during', Load[]> = { without: [], during: [] };
  let removed = 0;
  let purgingSeconds = 0;
  for (let r = 0; r < rounds; r++)
    for (const mode of r % 2 ? (['during', 'without'] as const) : (['without', 'during'] as const)) {
      const before = mode === 'during' ? await left() : 0;
      process.kill(purgerPid, mode === 'during' ? 'SIGCONT' : 'SIGSTOP');
      const started = performance.now();
      const result = await deps.send(serving.url, pid, `purge-${mode}-${r}`, window);
      if (mode === 'during') {
        process.kill(purgerPid, 'SIGSTOP');
        purgingSeconds += (performance.now() - started) / 1000;
        removed += before - (await left());
      }
      runs[mode].push(result);
      deps.log(
        `purge round ${r} ${mode}: ${result.rps.toFixed(0)} req/s, p99 ${result.p99} ms; ${removed} removed`,
      );
    }
  process.kill(purgerPid, 'SIGCONT');
  purger.process.kill('SIGTERM');
  const p99 = (xs: Load[]) => mean(xs.map((x) => x.p99));
  return {
    seeded: { dispatches: HISTORY, tenants: TENANTS, seconds },
    window_s: window,
    rounds,
    without_purge: summary(runs.without),
    during_purge: summary(runs.during),
    p99_during_vs_without: +(p99(runs.during) / p99(runs.without)).toFixed(3),
    rps_during_vs_without: ratio(
      runs.during.map((r) => r.rps),
      runs.without.map((r) => r.rps),
    ),
    purged: { rows: removed, rows_per_s_under_load: Math.round(removed / purgingSeconds) },
  };
}

/**
 * Bench section "soak": 4 gateways on one database with retention running, loaded at `BENCH_SOAK_LOAD` (default 0.7)
 * of the throughput they reach together, for `BENCH_SOAK_MINUTES` (default 10) one-minute windows. The database starts
 * with `BENCH_SOAK_HISTORY` (default 300,000) settled dispatches 500 days old, so the retention job (every 10 s)
 * deletes while the sends run. Per window: Postgres and gateway CPU per send, p99, the gateways' RSS, and the dispatch
 * tables' bytes (heap, indexes, TOAST) per stored dispatch — first window against last.
 */
export async function soakRun(deps: HistoryDeps): Promise<Json> {
  const minutes = Number(process.env.BENCH_SOAK_MINUTES ?? 10);
  const share = Number(process.env.BENCH_SOAK_LOAD ?? 0.7);
  const old = Number(process.env.BENCH_SOAK_HISTORY ?? 300_000);
  const dbUrl = await createDatabase(deps, 'bench_soak');
  // A first gateway migrates the database and connects the tenant, its retention off while the history is seeded
  // (the job would otherwise delete dispatches between the seed's two statements); then the 4 of the soak.
  const migrator = await deps.gateway(dbUrl, {
    DISPATCH_RETENTION_DAYS: '0',
    RECIPIENT_DATA_RETENTION_DAYS: '0',
  });
  await deps.connect(migrator.url, 'bench');
  const seeded = await seed(dbUrl, `interval '500 days' + g * interval '1 second'`, old);
  deps.log(`soak: ${old} settled dispatches 500 days old seeded in ${seeded} s`);
  migrator.process.kill('SIGTERM');
  const gateways = [];
  for (let k = 0; k < 4; k++) gateways.push(await deps.gateway(dbUrl, { RETENTION_INTERVAL_MS: '10000' }));
  const urls = gateways.map((g) => g.url);
  const pids = gateways.map((g) => g.process.pid as number);
  await deps.sendAll(urls, pids, 'soak-warm', 5);
  const capacity = await deps.sendAll(urls, pids, 'soak-capacity', 10);
  const rate = Math.round(capacity.rps * share);
  deps.log(`soak: 4 gateways reach ${capacity.rps.toFixed(0)} req/s together; loading at ${rate} req/s`);
  const bytesPerDispatch = async () => {
    const [r] = await sql(
      dbUrl,
      `SELECT (pg_total_relation_size('reward_dispatches') + pg_total_relation_size('dispatch_rewards'))::bigint AS bytes,
              (SELECT count(*) FROM reward_dispatches)::bigint AS n`,
    );
    return { bytes: Number(r.bytes), dispatches: Number(r.n) };
  };
  const windows: Json[] = [];
  for (let w = 0; w < minutes; w++) {
    const result = await deps.sendAll(urls, pids, `soak-${w}`, 60, rate);
    const size = await bytesPerDispatch();
    const rss = pids.map((pid) => Math.round(deps.rssMb(pid)));
    windows.push({
      minute: w + 1,
      rps: Math.round(result.rps),
      p99_ms: result.p99,
      errors: result.errors + result.non2xx,
      postgres_cpu_ms_per_send: result.cpu.postgres,
      gateway_cpu_ms_per_send: result.cpu.gateway,
      rss_mb: rss,
      dispatches: size.dispatches,
      bytes_per_dispatch: Math.round(size.bytes / Math.max(1, size.dispatches)),
    });
    deps.log(`soak minute ${w + 1}: ${JSON.stringify(windows[w])}`);
  }
  for (const g of gateways) g.process.kill('SIGTERM');
  const first = windows[0];
  const last = windows[windows.length - 1];
  const left = Number(
    (await sql(dbUrl, `SELECT count(*)::int AS n FROM reward_dispatches WHERE tenant_id LIKE 'hist-%'`))[0].n,
  );
  return {
    gateways: 4,
    capacity_rps: Math.round(capacity.rps),
    load_rps: rate,
    old_dispatches: { seeded: old, left_at_end: left },
    windows,
    last_vs_first: {
      postgres_cpu_per_send: +(last.postgres_cpu_ms_per_send / first.postgres_cpu_ms_per_send).toFixed(3),
      gateway_cpu_per_send: +(last.gateway_cpu_ms_per_send / first.gateway_cpu_ms_per_send).toFixed(3),
      p99: +(last.p99_ms / first.p99_ms).toFixed(3),
      rss: +(mean(last.rss_mb) / mean(first.rss_mb)).toFixed(3),
    },
  };
}
