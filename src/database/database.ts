import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Client, type Pool, type PoolClient } from 'pg';
import type { DatabaseConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { BudgetPool, poolConfig } from './pg-pools';
import { inTransaction } from './sql';

/**
 * The process's pools, within the one connection budget (pg-pools.ts):
 * - `main`: everything by default;
 * - `relaxed`: asynchronous commit, for writes whose loss in a crash is harmless (progress a retry re-learns from the
 *   rewards service, an account's pacing slot);
 * - `lock`: the refresh lock's transactions (a row lock held across a token call), so refreshes cannot starve others;
 * - `listener()`: the one connection that LISTENs for cross-instance evictions.
 */
@Injectable()
export class Database implements OnApplicationShutdown {
  private readonly logger = new Logger(Database.name);
  readonly main: Pool;
  readonly relaxed: Pool;
  readonly lock: Pool;
  private closing?: Promise<void>;

  constructor(@InjectConfig('database') private readonly config: DatabaseConfig) {
    this.main = this.pool('main');
    this.relaxed = this.pool('relaxed');
    this.lock = this.pool('lock');
  }

  transaction<T>(work: (tx: PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.main, work);
  }

  /** A new, unconnected client for LISTEN. */
  listener(): Client {
    return new Client(poolConfig(this.config, 'listen'));
  }

  /**
   * Ends every pool (once) and resolves when every connection has closed: pg's `end()` resolves before, and a server
   * stopped right after (the embedded Postgres on Ctrl-C) would log those sessions as lost connections.
   */
  close(): Promise<void> {
    this.closing ??= Promise.all([this.main, this.relaxed, this.lock].map(endPool)).then(() => undefined);
    return this.closing;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.close();
  }

  private pool(role: 'main' | 'relaxed' | 'lock'): Pool {
    const pool = new BudgetPool(poolConfig(this.config, role));
    // An idle client whose server went away: pg drops it; without a listener the event would end the process.
    pool.on('error', (error) => this.logger.warn(`${role} pool: ${error.message}`));
    const open = new Set<unknown>();
    pool.on('connect', (client) => open.add(client));
    pool.on('remove', (client) => open.delete(client));
    openClients.set(pool, open);
    return pool;
  }
}

/** The clients of each pool whose connection has not closed yet. */
const openClients = new WeakMap<Pool, Set<unknown>>();

async function endPool(pool: Pool): Promise<void> {
  const open = openClients.get(pool) ?? new Set();
  await pool.end();
  if (open.size === 0) return;
  await new Promise<void>((resolve) => {
    const bound = setTimeout(resolve, 2_000); // a server that never answers the goodbye must not hold the stop
    pool.on('remove', (client) => {
      open.delete(client);
      if (open.size > 0) return;
      clearTimeout(bound);
      resolve();
    });
  });
}
