import * as pg from 'pg';
import type { ClientConfig, PoolClient, PoolConfig } from 'pg';
import type { DatabaseConfig } from '../config/app-config';

/**
 * The one way to Postgres: every connection of a process gets the same settings (statement and idle-in-transaction
 * timeouts, TCP keep-alive, a bounded wait for a free connection, `application_name` per pool) and the process stays
 * within one budget (`DATABASE_MAX_CONNECTIONS`) split between the pools. Size Postgres as instances × budget ≤
 * max_connections − reserve (admin tools, migrations, monitoring).
 */
type PoolRole = 'main' | 'lock' | 'relaxed' | 'listen';

/** Cancels a stuck statement; bounds an idle transaction's row locks (a stalled instance). */
const STATEMENT_TIMEOUT_MS = 30_000;
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;
/** How long a caller waits for a free connection of its pool before the request answers 503. */
const CONNECTION_WAIT_MS = 5_000;
/** How long a refused connection (`53300 too_many_connections`, a server starting up) is retried. */
const CONNECT_RETRY_WINDOW_MS = 10_000;

/**
 * The budget split (at least 5): `listen` holds one connection for LISTEN/NOTIFY; `lock` serves the refresh lock (a
 * row lock held across a token call); `relaxed` serves asynchronous-commit writes; `main` takes the rest.
 */
function splitBudget(maxConnections: number): Record<PoolRole, number> {
  const total = Math.max(5, maxConnections);
  const lock = Math.max(1, Math.round(total * 0.2));
  const relaxed = Math.max(1, Math.round(total * 0.15));
  return { main: total - lock - relaxed - 1, lock, relaxed, listen: 1 };
}

/** The pg configuration of one pool of the budget (for `listen`, of its one connection). */
export function poolConfig(settings: DatabaseConfig, role: PoolRole): PoolConfig {
  return {
    connectionString: settings.url,
    max: splitBudget(settings.maxConnections)[role],
    application_name: `rewards-gateway:${role}`,
    options:
      `-c statement_timeout=${STATEMENT_TIMEOUT_MS} -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}` +
      (role === 'relaxed' ? ' -c synchronous_commit=off' : ''),
    keepAlive: true,
    connectionTimeoutMillis: CONNECTION_WAIT_MS,
    idleTimeoutMillis: 30_000,
  };
}

/** The migrations' connection, outside the budget (the reserve): no statement timeout, a migration may run long. */
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

/** A pg Pool that treats a server refusing connections as a wait, retried with backoff, not as a failed request. */
export class BudgetPool extends pg.Pool {
  override connect(): Promise<PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<PoolClient> | void {
    if (!callback) return this.connectRetrying();
    // pool.query()'s form, on every statement: straight through pg-pool; only a refused connection retries.
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
 * pg's pool listens for errors of idle clients only: a checked-out client whose backend goes away would emit 'error'
 * with no listener, which ends the process. The query under way rejects anyway and the pool drops the client on
 * release; this listener (once per client) only keeps the event from being fatal.
 */
function guarded(client: PoolClient): PoolClient {
  const c = client as PoolClient & { [GUARDED]?: true };
  if (!c[GUARDED]) {
    c.on('error', () => undefined);
    c[GUARDED] = true;
  }
  return client;
}
