import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { Database } from '../database/database';
import { ConnectionStateStore } from './connection-state.store';
import { ConnectSessionStore } from './connect-session.store';
import { PgStateStore } from './oauth-state.store';

/** How often an instance tries a pass (with jitter); only one instance at a time runs it. */
export const HOUSEKEEPING_INTERVAL_MS = 10 * 60_000;
/** Rows deleted per statement, and statements per table per pass: the purge never holds much at once. */
export const PURGE_BATCH = 1_000;
const MAX_BATCHES = 20;
/** Kept after expiry (a late browser still sees "this link has expired", not "unknown"). */
export const SESSION_GRACE_MS = 24 * 3600_000;
export const STATE_GRACE_MS = 3600_000;
/** The connection audit trail kept for ops. */
export const EVENTS_KEPT_DAYS = 90;
const LOCK_ID = 7_240_152; // arbitrary, constant: one instance at a time

/**
 * Background purge of what is never read again: expired connect sessions, used or expired OAuth states, connection
 * events older than 90 days. Each table's rows are deleted by its own store, in bounded batches, under a transaction
 * advisory lock so that one instance at a time does it.
 */
@Injectable()
export class HousekeepingService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(HousekeepingService.name);
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Database,
    private readonly sessions: ConnectSessionStore,
    private readonly states: PgStateStore,
    private readonly connections: ConnectionStateStore,
  ) {}

  onApplicationBootstrap(): void {
    // Random start offset: instances started together do not all try at the same moment.
    this.timer = setTimeout(() => this.loop(), Math.random() * 60_000);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private loop(): void {
    void this.purge()
      .catch((error: Error) => this.logger.warn(`housekeeping failed: ${error.message}`))
      .finally(() => {
        if (this.timer === null) return;
        this.timer = setTimeout(() => this.loop(), HOUSEKEEPING_INTERVAL_MS * (0.75 + Math.random() / 2));
        this.timer.unref();
      });
  }

  /** One pass; null when another instance holds the pass, else what was deleted. */
  async purge(): Promise<{
    connect_sessions: number;
    oauth_states: number;
    connection_events: number;
  } | null> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock($1) AS locked`, [
        LOCK_ID,
      ]);
      if (!rows[0]?.locked) return null;
      const drain = async (batch: () => Promise<number>) => {
        let total = 0;
        for (let i = 0; i < MAX_BATCHES; i++) {
          const n = await batch();
          total += n;
          if (n < PURGE_BATCH) break;
        }
        return total;
      };
      const result = {
        oauth_states: await drain(() => this.states.purgeExpired(tx, STATE_GRACE_MS, PURGE_BATCH)),
        connect_sessions: await drain(() => this.sessions.purgeExpired(tx, SESSION_GRACE_MS, PURGE_BATCH)),
        connection_events: await drain(() =>
          this.connections.purgeOldEvents(tx, EVENTS_KEPT_DAYS, PURGE_BATCH),
        ),
      };
      if (result.oauth_states || result.connect_sessions || result.connection_events)
        this.logger.log(result, 'housekeeping: purged');
      return result;
    });
  }
}
