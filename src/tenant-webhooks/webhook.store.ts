import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { InFlightCounts } from '../common/claim-loop';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import { Vault, WEBHOOK_SECRET } from '../token-vault/vault.service';
import type { DeliveryResponse, WebhookResponse } from './dto/webhook.dto';
import { MAX_ENDPOINTS_PER_TENANT, type TenantEvent } from './webhook-events';
import { purgeBatch } from '../retention/purge-batch';

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** A claimed outbox row, with what its delivery needs. `attempts` is the claim's fence. */
export interface ClaimedDelivery {
  id: string;
  endpoint_id: string;
  tenant_id: string;
  payload: TenantEvent;
  attempts: number;
  url: string;
  secret_enc: string;
}

/** An endpoint in trouble, for the ops dashboard. */
export type FailingEndpoint = { endpoint_id: string; tenant_id: string } & Pick<
  WebhookResponse,
  'url' | 'failing_since' | 'consecutive_failures' | 'last_error' | 'disabled_at' | 'disabled_reason'
> & { disabled: boolean };

/** An endpoint as the API shows it (WebhookResponse). */
const ENDPOINT = `id, url, events,
  CASE WHEN disabled_at IS NOT NULL THEN 'disabled' WHEN failing_since IS NOT NULL THEN 'failing' ELSE 'active' END AS status,
  created_at, consecutive_failures, failing_since, last_success_at, last_failure_at, last_error, disabled_at, disabled_reason`;
/** An outbox row as the API shows it (DeliveryResponse): `next_attempt_at` only while pending. */
const DELIVERY = `id, event_type AS type, status, attempts, last_status_code, last_error,
  CASE WHEN status = 'pending' THEN next_attempt_at END AS next_attempt_at, last_attempt_at, delivered_at, created_at`;

/**
 * The outbox's one INSERT, run alone (`enqueueEvents`) or embedded as a CTE in a state change's statement: each event
 * `events` yields (one `jsonb` column) becomes one row per active endpoint of its tenant subscribed to its type or `*`,
 * read in the caller's transaction (an endpoint registered later never receives older events). The endpoints are
 * found by tenant in a LATERAL subquery (`OFFSET 0`: never flattened into a join, which a cached generic plan may turn
 * into a scan of every endpoint).
 */
export function outboxInsert(events: string): string {
  return `INSERT INTO webhook_outbox (endpoint_id, tenant_id, event_type, payload)
    SELECT e.id, e.tenant_id, ev.event->>'type', ev.event
      FROM (${events}) AS ev(event),
           LATERAL (SELECT id, tenant_id FROM webhook_endpoints
                     WHERE tenant_id = ev.event->'data'->>'tenant_id' AND disabled_at IS NULL
                       AND events && ARRAY[ev.event->>'type', '*'] OFFSET 0) e`;
}

const ENQUEUE = outboxInsert(`SELECT jsonb_array_elements($1::jsonb)`);

/** Queues events in the caller's transaction: they commit, or roll back, with the change they describe. */
export async function enqueueEvents(sql: Sql, events: readonly TenantEvent[]): Promise<void> {
  if (events.length) await sql.query(ENQUEUE, [JSON.stringify(events)]);
}

/**
 * Erasure: every occurrence of `needle` (a recipient's e-mail or phone, any case) in the tenant's pending events
 * becomes `[redacted]` (no event type names a recipient today). Returns the events changed.
 */
export async function eraseFromOutbox(sql: Sql, tenantId: string, needle: string): Promise<number> {
  const pattern = needle.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const { rowCount } = await sql.query(
    `UPDATE webhook_outbox SET payload = regexp_replace(payload::text, $2, '[redacted]', 'gi')::jsonb
      WHERE endpoint_id = ANY(ARRAY(SELECT id FROM webhook_endpoints WHERE tenant_id = $1)) AND status = 'pending'
        AND strpos(lower(payload::text), lower($3)) > 0`,
    [tenantId, pattern, needle],
  );
  return rowCount ?? 0;
}

/** Every statement that writes `webhook_endpoints` and `webhook_outbox` (but the inserts above); seals the secret. */
@Injectable()
export class WebhookStore {
  constructor(
    private readonly db: Database,
    private readonly vault: Vault,
  ) {}

  /**
   * Registers an endpoint unless the tenant has MAX_ENDPOINTS_PER_TENANT already (under a per-tenant advisory lock, so
   * two concurrent registrations cannot both take the last place). Returns null at the limit.
   */
  async insertEndpoint(tenantId: string, url: string, events: string[], secret: string) {
    const id = randomUUID();
    const secretEnc = this.vault.seal(WEBHOOK_SECRET, id, secret);
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('rg_webhook_endpoints'), hashtext($1))`, [
        tenantId,
      ]);
      const { rows } = await tx.query<WebhookResponse>(
        `INSERT INTO webhook_endpoints (id, tenant_id, url, events, secret_enc)
         SELECT $1::uuid, $2::varchar, $3::varchar, $4::text[], $5::text
          WHERE (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $2::varchar) < $6::int
         RETURNING ${ENDPOINT}`,
        [id, tenantId, url, events, secretEnc, MAX_ENDPOINTS_PER_TENANT],
      );
      return rows[0] ?? null;
    });
  }

  /** The signing secret of a claimed delivery's endpoint (VaultDecryptionError when VAULT_KEYS lost its key). */
  openSecret(row: Pick<ClaimedDelivery, 'endpoint_id' | 'secret_enc'>): string {
    return this.vault.open(WEBHOOK_SECRET, row.endpoint_id, row.secret_enc);
  }

  /** The tenant's endpoints, oldest first; only endpoint `id`, when given. */
  async endpoints(tenantId: string, id?: string): Promise<WebhookResponse[]> {
    const { rows } = await this.db.main.query<WebhookResponse>(
      `SELECT ${ENDPOINT} FROM webhook_endpoints
        WHERE tenant_id = $1 AND ($2::uuid IS NULL OR id = $2) ORDER BY created_at, id`,
      [tenantId, id ?? null],
    );
    return rows;
  }

  /** Deletes the endpoint and its outbox rows (pending ones are not delivered any more). */
  async deleteEndpoint(tenantId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.main.query(
      `DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`,
      [tenantId, id],
    );
    return Boolean(rowCount);
  }

  /** Enables a disabled endpoint again, its failure record cleared. Returns the row, or null when unknown. */
  async enableEndpoint(tenantId: string, id: string): Promise<WebhookResponse | null> {
    const { rows } = await this.db.main.query<WebhookResponse>(
      `UPDATE webhook_endpoints
          SET disabled_at = NULL, disabled_reason = NULL, consecutive_failures = 0, failing_since = NULL
        WHERE tenant_id = $1 AND id = $2
        RETURNING ${ENDPOINT}`,
      [tenantId, id],
    );
    return rows[0] ?? null;
  }

  async listDeliveries(
    endpointId: string,
    limit: number,
    status?: DeliveryStatus,
  ): Promise<DeliveryResponse[]> {
    const { rows } = await this.db.main.query<DeliveryResponse>(
      `SELECT ${DELIVERY} FROM webhook_outbox
        WHERE endpoint_id = $1 AND ($3::text IS NULL OR status = $3)
        ORDER BY created_at DESC, id LIMIT $2`,
      [endpointId, limit, status ?? null],
    );
    return rows;
  }

  /** Queues an event again, due now, with the same id (`webhook-id`) and a new give-up window. */
  async replay(endpointId: string, eventId: string): Promise<DeliveryResponse | null> {
    const { rows } = await this.db.main.query<DeliveryResponse>(
      `UPDATE webhook_outbox SET status = 'pending', next_attempt_at = now(), queued_at = now(), delivered_at = NULL
        WHERE endpoint_id = $1 AND id = $2
        RETURNING ${DELIVERY}`,
      [endpointId, eventId],
    );
    return rows[0] ?? null;
  }

  /**
   * Claims up to `limit` due rows of active endpoints (SKIP LOCKED: one instance each), at most `perEndpoint` in flight
   * per endpoint on this instance (`busy`: endpoint id → deliveries in flight here). The claim is a lease: it counts the
   * attempt and moves `next_attempt_at` `leaseMs` ahead, so the row comes back on its own if this process dies.
   */
  async claimDue(
    limit: number,
    busy: InFlightCounts,
    perEndpoint: number,
    leaseMs: number,
  ): Promise<ClaimedDelivery[]> {
    const busyIds = [...busy.keys()];
    const full = busy.keysAtLeast(perEndpoint);
    const { rows } = await this.db.main.query<ClaimedDelivery>({
      name: 'rg_webhook_claim_v1',
      text: `WITH candidates AS (
               SELECT o.id, o.endpoint_id, o.next_attempt_at FROM webhook_outbox o
                WHERE o.status = 'pending' AND o.next_attempt_at <= now() AND NOT (o.endpoint_id = ANY($5::uuid[]))
                ORDER BY o.next_attempt_at LIMIT $6
             ), ranked AS (
               SELECT c.id, c.next_attempt_at,
                      row_number() OVER (PARTITION BY c.endpoint_id ORDER BY c.next_attempt_at) + coalesce(b.n, 0) AS slot
                 FROM candidates c LEFT JOIN unnest($2::uuid[], $3::int[]) AS b(endpoint_id, n) ON b.endpoint_id = c.endpoint_id
             ), picked AS (
               SELECT id FROM ranked WHERE slot <= $4 ORDER BY slot, next_attempt_at LIMIT $1
             ), due AS (
               SELECT o.id FROM webhook_outbox o
                WHERE o.id IN (SELECT id FROM picked) AND o.status = 'pending' AND o.next_attempt_at <= now()
                FOR UPDATE SKIP LOCKED
             )
             UPDATE webhook_outbox o
                SET attempts = o.attempts + 1, last_attempt_at = now(),
                    next_attempt_at = now() + make_interval(secs => $7::float8 / 1000)
               FROM due, webhook_endpoints e
              WHERE o.id = due.id AND e.id = o.endpoint_id AND e.disabled_at IS NULL
              RETURNING o.id, o.endpoint_id, o.tenant_id, o.payload, o.attempts, e.url, e.secret_enc`,
      values: [
        limit,
        busyIds,
        busyIds.map((id) => busy.get(id) ?? 0),
        perEndpoint,
        full,
        Math.max(limit * 4, 100),
        leaseMs,
      ],
    });
    return rows;
  }

  /** A 2xx: delivered (even if its lease passed meanwhile: it did arrive); the endpoint's failures cleared. */
  async recordSuccess(row: ClaimedDelivery, statusCode: number): Promise<void> {
    await this.db.main.query({
      name: 'rg_webhook_success_v1',
      text: `WITH o AS (
               UPDATE webhook_outbox SET status = 'delivered', delivered_at = now(), last_status_code = $2, last_error = NULL
                WHERE id = $1 AND status = 'pending'
                RETURNING endpoint_id
             )
             UPDATE webhook_endpoints w SET consecutive_failures = 0, failing_since = NULL, last_success_at = now()
               FROM o WHERE w.id = o.endpoint_id`,
      values: [row.id, statusCode],
    });
  }

  /**
   * A failed attempt, applied only if the row is still this claim's (`attempts` fences it): retried after `delayMs`,
   * or `failed` once `giveUpAfterMs` has passed since it was queued. The endpoint counts the failure; failing
   * continuously for `disableAfterMs` disables it, and its pending rows (this one included) end `failed` — replay
   * them once it is enabled. `gaveUp`: this row ended `failed`.
   */
  async recordFailure(
    row: ClaimedDelivery,
    outcome: { statusCode: number | null; error: string },
    policy: { delayMs: number; giveUpAfterMs: number; disableAfterMs: number },
  ): Promise<{ gaveUp: boolean; disabled: boolean }> {
    const { rows } = await this.db.main.query<{ status: string | null; just_disabled: boolean | null }>({
      name: 'rg_webhook_failure_v2',
      text: `WITH ep AS (
               SELECT w.id, (w.disabled_at IS NULL AND w.failing_since <= now() - make_interval(secs => $7::float8 / 1000)) AS disable
                 FROM webhook_endpoints w WHERE w.id = $8
             ), o AS (
               UPDATE webhook_outbox x
                  SET last_status_code = $3, last_error = $4,
                      status = CASE WHEN ep.disable OR x.queued_at <= now() - make_interval(secs => $6::float8 / 1000)
                                    THEN 'failed' ELSE 'pending' END,
                      next_attempt_at = now() + make_interval(secs => $5::float8 / 1000)
                 FROM ep
                WHERE x.id = $1 AND x.attempts = $2 AND x.status = 'pending' AND x.endpoint_id = ep.id
                RETURNING x.endpoint_id, x.status
             ), e AS (
               UPDATE webhook_endpoints w
                  SET consecutive_failures = w.consecutive_failures + 1,
                      failing_since = coalesce(w.failing_since, now()),
                      last_failure_at = now(), last_error = $4,
                      disabled_at = CASE WHEN ep.disable THEN now() ELSE w.disabled_at END,
                      disabled_reason = CASE WHEN ep.disable
                                             THEN format('failing continuously since %s (%s consecutive failed attempts); last error: %s',
                                                         to_char(w.failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                                                         w.consecutive_failures + 1, $4::text)
                                             ELSE w.disabled_reason END
                 FROM o, ep WHERE w.id = o.endpoint_id AND ep.id = w.id
                RETURNING w.id, ep.disable AS just_disabled
             ), dropped AS (
               UPDATE webhook_outbox x
                  SET status = 'failed', last_error = 'not delivered: the endpoint was disabled', next_attempt_at = now()
                 FROM e WHERE e.just_disabled AND x.endpoint_id = e.id AND x.status = 'pending' AND x.id <> $1
             )
             SELECT (SELECT status FROM o) AS status, (SELECT just_disabled FROM e) AS just_disabled`,
      values: [
        row.id,
        row.attempts,
        outcome.statusCode,
        outcome.error.slice(0, 500),
        policy.delayMs,
        policy.giveUpAfterMs,
        policy.disableAfterMs,
        row.endpoint_id,
      ],
    });
    return { gaveUp: rows[0]?.status === 'failed', disabled: rows[0]?.just_disabled === true };
  }

  /** Endpoints failing now or disabled, disabled first, then the longest failing (ops dashboard). */
  async failingEndpoints(limit: number): Promise<FailingEndpoint[]> {
    const { rows } = await this.db.main.query<FailingEndpoint>(
      `SELECT id AS endpoint_id, tenant_id, url, failing_since, consecutive_failures, last_error,
              disabled_at IS NOT NULL AS disabled, disabled_at, disabled_reason
         FROM webhook_endpoints
        WHERE failing_since IS NOT NULL OR disabled_at IS NOT NULL
        ORDER BY disabled_at IS NULL, coalesce(disabled_at, failing_since), id
        LIMIT $1`,
      [limit],
    );
    return rows;
  }

  async pendingCount(): Promise<number> {
    const { rows } = await this.db.main.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_outbox WHERE status = 'pending'`,
    );
    return rows[0]?.n ?? 0;
  }

  /** Retention: deletes up to `limit` delivered or failed rows queued before `olderThan`; returns how many. */
  purgeOld(olderThan: Date, limit: number): Promise<number> {
    const text = `DELETE FROM webhook_outbox WHERE id IN (
       SELECT o.id FROM webhook_endpoints e,
              LATERAL (SELECT id FROM webhook_outbox
                        WHERE endpoint_id = e.id AND created_at < $1 AND status <> 'pending'
                        ORDER BY created_at LIMIT $2) o
        LIMIT $2)`;
    return purgeBatch(this.db.main, text, olderThan, limit);
  }

  /** A deleted tenant: up to `limit` of its queued events, then (none left) its endpoints. Returns the rows deleted. */
  async purgeTenant(tenantId: string, limit: number): Promise<number> {
    const outbox = `DELETE FROM webhook_outbox WHERE id IN (
       SELECT o.id FROM webhook_endpoints e, LATERAL (SELECT id FROM webhook_outbox WHERE endpoint_id = e.id LIMIT $2) o
        WHERE e.tenant_id = $1 LIMIT $2)`;
    const events = await purgeBatch(this.db.main, outbox, tenantId, limit);
    if (events) return events;
    const endpoints = await this.db.main.query(`DELETE FROM webhook_endpoints WHERE tenant_id = $1`, [
      tenantId,
    ]);
    return endpoints.rowCount ?? 0;
  }
}
