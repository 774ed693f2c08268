import { Injectable } from '@nestjs/common';
import { Clock, systemClock } from '../common/clock';
import type { RewardsEnvironment } from '../config/app-config';
import type { Sql } from '../database/sql';
import { connectionNeedsReauth, connectionRecovered } from '../tenant-webhooks/webhook-events';
import { enqueueEvents } from '../tenant-webhooks/webhook.store';
import type { ConnectionStatus } from '../token-vault/access-token.provider';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

export interface ConnectionRow {
  id: string;
  tenant_id: string;
  environment: RewardsEnvironment;
  status: string;
  [column: string]: unknown;
}

/** A connection after a status change, and its status before (read under the row's lock). */
type StatusChange = Pick<ConnectionRow, 'id' | 'tenant_id' | 'environment'> & { previous_status: string };

export interface AlertTransition {
  id: string;
  tenant_id: string;
  environment: string;
  status: string;
  kind: 'connection.broken' | 'connection.recovered';
  last_error_code: string | null;
  last_error_message: string | null;
}

/**
 * Every statement that writes `connections` and `connection_events`: the state machine (active, error, needs_reauth,
 * disconnected), counters, probes, alert state. The vault calls it through `ConnectionStatus`, so a refresh's outcome
 * is written in the refresh's transaction. Each method runs on the client it is given; a change that is a tenant event
 * queues it on that same client.
 */
@Injectable()
export class ConnectionStateStore implements ConnectionStatus {
  constructor(private readonly clock: Clock = systemClock) {}

  async event(q: Sql, connectionId: string, type: string, detail: unknown = {}): Promise<void> {
    await q.query(`INSERT INTO connection_events (connection_id, type, detail) VALUES ($1, $2, $3)`, [
      connectionId,
      type,
      detail,
    ]);
  }

  /** Ends the tenant's live connection in an environment (if any); the rows with their `previous_status`. */
  async disconnectLive(
    q: Sql,
    tenantId: string,
    environment: string,
  ): Promise<(ConnectionRow & { previous_status: string })[]> {
    const { rows } = await q.query<ConnectionRow & { previous_status: string }>(
      `UPDATE connections c SET status = 'disconnected', disconnected_at = now(), updated_at = now()
         FROM (SELECT id, status FROM connections
                WHERE tenant_id = $1 AND environment = $2 AND status <> 'disconnected' FOR NO KEY UPDATE) old
        WHERE c.id = old.id RETURNING c.*, old.status AS previous_status`,
      [tenantId, environment],
    );
    return rows;
  }

  /**
   * The tenant's live connection, locked for the transaction — after an advisory lock on (tenant, environment), so two
   * callbacks take turns: the second reads the connection the first made, not a row replaced while it waited.
   */
  async lockLive(q: Sql, tenantId: string, environment: string): Promise<ConnectionRow | null> {
    await q.query(`SELECT pg_advisory_xact_lock(hashtext('rg.connect'), hashtext($1 || '/' || $2))`, [
      tenantId,
      environment,
    ]);
    return this.findLive(q, tenantId, environment, true);
  }

  /** The tenant's live connection in an environment (one at most: `connections_one_live_idx`). */
  async findLive(q: Sql, tenantId: string, env: string, lock = false): Promise<ConnectionRow | null> {
    const { rows } = await q.query<ConnectionRow>(
      `SELECT * FROM connections WHERE tenant_id = $1 AND environment = $2 AND status <> 'disconnected'
       ${lock ? 'FOR UPDATE' : ''}`,
      [tenantId, env],
    );
    return rows[0] ?? null;
  }

  /** The new active connection, in the transaction that ended `replaced`: a broken one replaced is a recovery. */
  async insertActive(
    q: Sql,
    tenantId: string,
    environment: RewardsEnvironment,
    scopes: string[],
    accessExpiresAt: Date,
    organization: { id: string; name: string | null } | null,
    replaced: readonly { id: string; previous_status: string }[],
  ): Promise<string> {
    const { rows } = await q.query<{ id: string }>(
      `INSERT INTO connections (tenant_id, environment, status, scopes, access_expires_at, last_refreshed_at,
                                organization_id, organization_name)
       VALUES ($1, $2, 'active', $3, $4, now(), $5, $6) RETURNING id`,
      [tenantId, environment, scopes, accessExpiresAt, organization?.id ?? null, organization?.name ?? null],
    );
    const id = rows[0].id;
    const broken = replaced.find((old) => old.previous_status === 'needs_reauth');
    if (broken)
      await enqueueEvents(q, [
        connectionRecovered({ id, tenant_id: tenantId, environment }, broken.id, new Date(this.clock.now())),
      ]);
    return id;
  }

  async markUsed(q: Sql, connectionId: string): Promise<void> {
    await q.query(`UPDATE connections SET last_used_at = now() WHERE id = $1`, [connectionId]);
  }

  /** needs_reauth with the reason; `fromLiveOnly` leaves a broken or ended connection alone. True if it changed. */
  async markNeedsReauth(
    q: Sql,
    connectionId: string,
    code: string,
    message: string,
    detail: Record<string, unknown>,
    fromLiveOnly = false,
  ): Promise<boolean> {
    const { rows } = await q.query<StatusChange>(
      `UPDATE connections c SET status = 'needs_reauth', last_error_code = $2, last_error_message = $3, last_error_at = now(),
              backoff_until = NULL, updated_at = now()
         FROM (SELECT id, status FROM connections WHERE id = $1 FOR NO KEY UPDATE) old
        WHERE c.id = old.id ${fromLiveOnly ? `AND old.status IN ('active', 'error')` : ''}
        RETURNING c.id, c.tenant_id, c.environment, old.status AS previous_status`,
      [connectionId, code, message],
    );
    const changed = rows[0];
    if (!changed) return false;
    await this.event(q, connectionId, 'needs_reauth', { ...detail, message });
    if (changed.previous_status !== 'needs_reauth')
      await enqueueEvents(q, [
        connectionNeedsReauth(
          changed,
          { previous_status: changed.previous_status, reason: code, message },
          new Date(this.clock.now()),
        ),
      ]);
    return true;
  }

  /** Whether a refresh of unknown outcome (it may have consumed the token) happened since the last successful one. */
  async refreshOutcomeUnknownSinceLastSuccess(q: Sql, connectionId: string): Promise<boolean> {
    const { rows } = await q.query<{ outcome_unknown: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM connection_events WHERE connection_id = $1 AND type = 'refresh_failed'
                       AND (detail->>'outcome_unknown')::boolean
                       AND at > coalesce((SELECT max(at) FROM connection_events WHERE connection_id = $1 AND type IN ('token_refreshed', 'connected')), '-infinity')) AS outcome_unknown`,
      [connectionId],
    );
    return rows[0]?.outcome_unknown === true;
  }

  /** Active, with the refreshed token's expiry; a broken connection active again is `connection.recovered`. */
  async markRefreshed(
    q: Sql,
    connectionId: string,
    accessExpiresAt: Date,
    detail: Record<string, unknown>,
  ): Promise<void> {
    const { rows } = await q.query<StatusChange>(
      `UPDATE connections c SET status = 'active', last_refreshed_at = now(), access_expires_at = $2,
              refresh_count = c.refresh_count + 1, consecutive_failures = 0, backoff_until = NULL,
              last_error_code = NULL, last_error_message = NULL, updated_at = now()
         FROM (SELECT id, status FROM connections WHERE id = $1 FOR NO KEY UPDATE) old
        WHERE c.id = old.id
        RETURNING c.id, c.tenant_id, c.environment, old.status AS previous_status`,
      [connectionId, accessExpiresAt],
    );
    await this.event(q, connectionId, 'token_refreshed', detail);
    if (rows[0]?.previous_status === 'needs_reauth')
      await enqueueEvents(q, [connectionRecovered(rows[0], null, new Date(this.clock.now()))]);
  }

  /** Counts a transient refresh failure and starts the cooldown (`error` from `errorThreshold` failures). */
  async markRefreshFailed(
    q: Sql,
    connectionId: string,
    message: string,
    policy: { errorThreshold: number; backoffBaseMs: number; backoffMaxMs: number },
    detail: Record<string, unknown>,
  ): Promise<number> {
    const { rows } = await q.query<{ consecutive_failures: number }>(
      `UPDATE connections SET consecutive_failures = consecutive_failures + 1, last_error_code = 'refresh_transient',
              last_error_message = $2, last_error_at = now(),
              status = CASE WHEN status = 'active' AND consecutive_failures + 1 >= $3 THEN 'error' ELSE status END,
              backoff_until = now() + make_interval(secs => least($4::float8, $5::float8 * power(2, consecutive_failures)) / 1000),
              updated_at = now()
        WHERE id = $1 RETURNING consecutive_failures`,
      [connectionId, message, policy.errorThreshold, policy.backoffMaxMs, policy.backoffBaseMs],
    );
    const failures = rows[0]?.consecutive_failures ?? 1;
    await this.event(q, connectionId, 'refresh_failed', { ...detail, consecutive_failures: failures });
    return failures;
  }

  /** A probe's outcome; the organization it named fills in an unknown one and its name, never changes a known id. */
  async recordProbe(
    q: Sql,
    connectionId: string,
    ok: boolean,
    error: string | null,
    organization: { id: string; name: string | null } | null = null,
  ): Promise<void> {
    await q.query(
      `UPDATE connections SET last_probe_at = now(), last_probe_ok = $2, last_probe_error = $3, updated_at = now(),
              organization_name = CASE WHEN $4::text IS NOT NULL AND coalesce(organization_id, $4) = $4
                                       THEN coalesce($5, organization_name) ELSE organization_name END,
              organization_id = coalesce(organization_id, $4)
        WHERE id = $1`,
      [connectionId, ok, error, organization?.id ?? null, organization?.name ?? null],
    );
    await this.event(q, connectionId, 'probe', { ok, error });
  }

  /** Claims up to `batch` idle live connections for a background probe (SKIP LOCKED). */
  async claimIdleForProbe(q: Sql, batch: number, idleAfterMs: number): Promise<string[]> {
    const { rows } = await q.query<{ id: string }>(
      `UPDATE connections c SET last_probe_at = now()
        FROM (SELECT id FROM connections
               WHERE status IN ('active', 'error')
                 AND coalesce(last_used_at, connected_at) < now() - make_interval(secs => $1::float8 / 1000)
                 AND (last_probe_at IS NULL OR last_probe_at < now() - make_interval(secs => $1::float8 / 1000))
               ORDER BY last_probe_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED) due
       WHERE c.id = due.id RETURNING c.id`,
      [idleAfterMs, batch],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Flips `alerted_state` of every connection whose health changed since its last alert (SKIP LOCKED) and returns the
   * transitions, each exactly once across instances; run it in the transaction that records the alerts.
   */
  async claimAlertTransitions(q: Sql): Promise<AlertTransition[]> {
    const { rows } = await q.query<AlertTransition>(
      `WITH prev AS (
         SELECT id, alerted_state AS previous FROM connections
          WHERE status <> 'disconnected'
            AND alerted_state IS DISTINCT FROM (CASE WHEN status = 'needs_reauth' THEN 'broken' ELSE 'ok' END)
          FOR UPDATE SKIP LOCKED
       ), flipped AS (
         UPDATE connections c
            SET alerted_state = CASE WHEN c.status = 'needs_reauth' THEN 'broken' ELSE 'ok' END
           FROM prev WHERE c.id = prev.id
          RETURNING c.id, c.tenant_id, c.environment, c.status, c.alerted_state, c.last_error_code, c.last_error_message, prev.previous
       ), replaced AS (
         UPDATE connections old SET alerted_state = 'closed'
          WHERE old.status = 'disconnected' AND old.alerted_state = 'broken'
            AND EXISTS (SELECT 1 FROM connections n WHERE n.tenant_id = old.tenant_id AND n.environment = old.environment AND n.status IN ('active', 'error'))
          RETURNING old.id, old.tenant_id, old.environment
       )
       SELECT id, CASE WHEN alerted_state = 'broken' THEN 'connection.broken' ELSE 'connection.recovered' END AS kind,
              tenant_id, environment, status, last_error_code, last_error_message
         FROM flipped WHERE alerted_state = 'broken' OR previous = 'broken'
       UNION ALL
       SELECT id, 'connection.recovered', tenant_id, environment, 'replaced', NULL, NULL FROM replaced`,
    );
    return rows;
  }

  /** Retention: deletes up to `limit` connection events recorded before `olderThan`. */
  purgeOldEvents(q: Sql, olderThan: Date, limit: number): Promise<number> {
    return purgeBatch(q, batchDelete.matching('connection_events', 'ctid', 'at < $1'), olderThan, limit);
  }
}
