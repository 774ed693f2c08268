import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { Client } from 'pg';
import { Database } from './database';
import type { Sql } from './sql';

/** What another instance must forget: a connection (disconnect, re-consent), an API key (revocation), a tenant. */
export type Eviction =
  | { kind: 'connection'; id: string; tenant: string; environment: string }
  | { kind: 'api_key'; hash: string }
  | { kind: 'api_key_prefix'; prefix: string }
  | { kind: 'tenant'; id: string };

const CHANNEL = 'rg_evict';

/**
 * Cross-instance cache eviction through LISTEN/NOTIFY. `publish` on a transaction is delivered when it commits. When
 * the listening connection is lost (messages may have been missed), every handler is told to drop everything, and
 * the connection is re-opened with backoff.
 */
@Injectable()
export class NotificationsService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(NotificationsService.name);
  private readonly handlers: ((eviction: Eviction | null) => void)[] = [];
  private client: Client | null = null;
  private stopped = false;
  private retryMs = 200;

  constructor(private readonly db: Database) {}

  /**
   * Keeps a process cache in step with the other instances: an eviction of `kind` drops the entry `key(eviction)`;
   * the listener being down for a while (messages may have been missed) drops everything.
   */
  evictFrom<K extends Eviction['kind']>(
    cache: { delete(key: string): unknown; clear(): void },
    kind: K,
    key: (eviction: Extract<Eviction, { kind: K }>) => string,
  ): void {
    this.handlers.push((eviction) => {
      if (eviction === null) cache.clear();
      else if (eviction.kind === kind) cache.delete(key(eviction as Extract<Eviction, { kind: K }>));
    });
  }

  async publish(eviction: Eviction, on: Sql = this.db.main): Promise<void> {
    await on.query(`SELECT pg_notify($1, $2)`, [CHANNEL, JSON.stringify(eviction)]);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.listen();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    await this.client?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    if (this.stopped) return;
    const client = this.db.listener();
    client.on('notification', (message) => {
      if (message.channel !== CHANNEL || !message.payload) return;
      try {
        this.dispatch(JSON.parse(message.payload) as Eviction);
      } catch {
        this.logger.warn('ignored a malformed eviction message');
      }
    });
    const lost = (error?: Error) => {
      if (this.client !== client || this.stopped) return;
      this.client = null;
      this.logger.warn(
        `eviction listener lost${error ? `: ${error.message}` : ''}; caches dropped, reconnecting`,
      );
      this.dispatch(null);
      this.listenLater();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      this.client = client;
      this.retryMs = 200;
    } catch (error) {
      await client.end().catch(() => undefined);
      if (this.stopped) return;
      this.logger.warn(`eviction listener could not start: ${(error as Error).message}; retrying`);
      this.listenLater();
    }
  }

  private listenLater(): void {
    setTimeout(() => void this.listen(), this.retryMs).unref();
    this.retryMs = Math.min(10_000, this.retryMs * 2);
  }

  private dispatch(eviction: Eviction | null): void {
    for (const handler of this.handlers) {
      try {
        handler(eviction);
      } catch (error) {
        this.logger.warn(`eviction handler failed: ${(error as Error).message}`);
      }
    }
  }
}
