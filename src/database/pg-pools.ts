import * as pg from 'pg';
import type { ClientConfig, PoolClient, PoolConfig } from 'pg';
import type { DatabaseConfig } from '../config/app-config';

/**
 * The one way to Postgres. Every connection of a gateway process is built here from one configuration with the same
 * settings — statement timeout, idle-in-transaction timeout, TCP keep-alive, a bounded wait for a free connection,
 * `application_name` per pool — and the process stays within one connection budget (`DATABASE_MAX_CONNECTIONS`),
 * split between the pools below. A stock Postgres allows 100 connections for every instance together: size it as
 * instances × budget ≤ max_connections − reserve (admin tools, migrations, monitoring).
 */
export type PoolRole = 'main' | 'lock' | 'relaxed' | 'listen';

/** A statement running longer than this is cancelled (a stuck query must not pin a connection). */
export const STATEMENT_TIMEOUT_MS = 30_000;
/** Bounds every session: a transaction left idle (a stalled instance) cannot hold row locks for long. */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;
/** How long a caller waits for a free connection of its pool before the request answers 503 (queueing, bounded). */
export const CONNECTION_WAIT_MS = 5_000;
/** How long a refused connection (`53300 too_many_connections`, a server starting up) is retried before failing. */
export const CONNECT_RETRY_WINDOW_MS = 10_000;

/**
 * The budget split: `listen` holds one connection for LISTEN/NOTIFY; `lock` serves the refresh lock (a row lock held
 * across a token call: session mode only); `relaxed` serves asynchronous-commit writes; `main` takes the rest.
 * Smallest budget: 5.
 */
export function splitBudget(maxConnections: number): Record<PoolRole, number> {
  const total = Math.max(5, maxConnections);
  const lock = Math.max(1, Math.round(total * 0.2));
  const relaxed = Math.max(1, Math.round(total * 0.15));
  const listen = 1;
  return { main: total - lock - relaxed - listen, lock, relaxed, listen };
}

/** Session options every connection gets; the relaxed pool also commits asynchronously. */
function sessionOptions(role: PoolRole): string {
  const options = [
    `-c statement_timeout=${STATEMENT_TIMEOUT_MS}`,
    `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
  ];
  if (role === 'relaxed') options.push('-c synchronous_commit=off');
  return options.join(' ');
}

/** The pg configuration of one pool of the budget (for `listen`, of its one connection). */
export function poolConfig(settings: DatabaseConfig, role: PoolRole): PoolConfig {
  return {
    connectionString: settings.url,
    max: splitBudget(settings.maxConnections)[role],
    application_name: `rewards-gateway:${role}`,
    options: sessionOptions(role),
    keepAlive: true,
    connectionTimeoutMillis: CONNECTION_WAIT_MS,
    idleTimeoutMillis: 30_000,
  };
}

/**
 * The connection migrations run on, outside the process budget (the reserve of the sizing rule above): no statement
 * timeout, since a migration may run long; the idle-in-transaction bound of every session.
 */
export function adminConnection(url: string): ClientConfig {
  return {
    connectionString: url,
    application_name: 'rewards-gateway:admin',
    options: `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
    keepAlive: true,
  };
}

function isRefused(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  // 53300 too_many_connections; 57P03 cannot_connect_now (starting up).
  return code === '53300' || code === '57P03';
}

type ConnectCallback = (
  err: Error | undefined,
  client: PoolClient | undefined,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  done: (release?: any) => void,
) => void;

/**
 * A pg Pool that treats a server refusing connections (`too_many_connections`, a server starting up) as a wait,
 * retried with backoff for `CONNECT_RETRY_WINDOW_MS`, not as a failed request.
 */
export class BudgetPool extends pg.Pool {
  // pg's typings overload connect(): both forms (promise and callback) are served.
  override connect(): Promise<PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<PoolClient> | void {
    if (!callback) return this.connectRetrying();
    // pool.query()'s form, on every statement: straight through pg-pool (no promise chain around it); only a refused
    // connection takes the retrying path.
    super.connect((error, client, done) => {
      if (!error) return callback(undefined, guarded(client as PoolClient), done);
      if (!isRefused(error)) return callback(error, undefined, done);
      this.connectRetrying().then(
        (retried) => callback(undefined, retried, (release?: Error | boolean) => retried.release(release)),
        (failed: Error) => callback(failed, undefined, () => undefined),
      );
    });
  }

  private async connectRetrying(): Promise<PoolClient> {
    // Real time on purpose: it bounds a reconnect loop that sleeps on real timers (a still test clock: no end).
    const deadline = Date.now() + CONNECT_RETRY_WINDOW_MS;
    for (let attempt = 0; ; attempt++) {
      try {
        return guarded(await super.connect());
      } catch (error) {
        if (!isRefused(error) || Date.now() >= deadline) throw error;
        const delay = Math.min(1_000, 50 * 2 ** attempt) * (0.5 + Math.random() / 2);
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }
}

const GUARDED = Symbol('rg-guarded');

/**
 * pg's pool listens for errors of idle clients only: a checked-out client whose backend goes away (a server restart,
 * `pg_terminate_backend`, a network cut) emits 'error' with no listener, which ends the process. The query under way
 * already rejects with that error, and the pool drops the dead client on release; this listener only keeps the event
 * from being fatal. Added once per client.
 */
function guarded(client: PoolClient): PoolClient {
  const c = client as PoolClient & { [GUARDED]?: true };
  if (!c[GUARDED]) {
    c.on('error', () => undefined);
    c[GUARDED] = true;
  }
  return client;
}

/** A pool of the process's budget. */
export function createPool(settings: DatabaseConfig, role: Exclude<PoolRole, 'listen'>): pg.Pool {
  return new BudgetPool(poolConfig(settings, role));
}
