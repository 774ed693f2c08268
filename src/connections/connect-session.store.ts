import { Injectable } from '@nestjs/common';
import type { RewardsEnvironment } from '../config/app-config';
import type { Sql } from '../database/sql';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

export interface ConnectSession {
  id: string;
  tenant_id: string;
  tenant_name: string;
  environment: RewardsEnvironment;
  scopes: string[];
  return_url: string | null;
  expires_at: Date;
  consumed_at: Date | null;
}

/** Every statement that writes `connect_sessions`: one-time connect links and what became of them. */
@Injectable()
export class ConnectSessionStore {
  async create(
    q: Sql,
    s: {
      tenantId: string;
      environment: string;
      tokenHash: string;
      scopes: string[];
      returnUrl: string | null;
      ttlMs: number;
    },
  ): Promise<{ id: string; expires_at: Date }> {
    const { rows } = await q.query<{ id: string; expires_at: Date }>(
      `INSERT INTO connect_sessions (tenant_id, environment, token_hash, scopes, return_url, expires_at)
       VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::float8 / 1000)) RETURNING id, expires_at`,
      [s.tenantId, s.environment, s.tokenHash, s.scopes, s.returnUrl, s.ttlMs],
    );
    return rows[0];
  }

  /** The session (of a tenant not deleted) by its id or its token's hash. */
  async find(q: Sql, by: 'id' | 'token_hash', value: string): Promise<ConnectSession | null> {
    const { rows } = await q.query<ConnectSession>(
      `SELECT s.*, t.name AS tenant_name FROM connect_sessions s JOIN tenants t ON t.id = s.tenant_id AND t.deleted_at IS NULL WHERE s.${by} = $1`,
      [value],
    );
    return rows[0] ?? null;
  }

  async recordOutcome(q: Sql, sessionId: string, outcome: string): Promise<void> {
    await q.query(`UPDATE connect_sessions SET outcome = $2 WHERE id = $1 AND consumed_at IS NULL`, [
      sessionId,
      outcome,
    ]);
  }

  /** Marks the session used, once: false when another callback got there first. */
  async consume(q: Sql, sessionId: string): Promise<boolean> {
    const { rowCount } = await q.query(
      `UPDATE connect_sessions SET consumed_at = now() WHERE id = $1 AND consumed_at IS NULL`,
      [sessionId],
    );
    return rowCount === 1;
  }

  async markConnected(q: Sql, sessionId: string, connectionId: string): Promise<void> {
    await q.query(`UPDATE connect_sessions SET outcome = 'connected', connection_id = $2 WHERE id = $1`, [
      sessionId,
      connectionId,
    ]);
  }

  /** Retention: deletes up to `limit` sessions that expired before `olderThan`. */
  purgeExpired(q: Sql, olderThan: Date, limit: number): Promise<number> {
    return purgeBatch(q, batchDelete.matching('connect_sessions', 'id', 'expires_at < $1'), olderThan, limit);
  }
}
