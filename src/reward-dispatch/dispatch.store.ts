import { Injectable, Optional } from '@nestjs/common';
import { Clock } from '../common/clock';
import { MetricsService } from '../metrics/metrics.service';
import type { Pool } from 'pg';
import { Database } from '../database/database';
import { GroupCommit } from '../database/group-commit';
import type { Sql } from '../database/sql';
import type { DispatchConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import {
  type DeliveryFacts,
  type DispatchFacts,
  type RewardFacts,
  type TenantEventOf,
  dispatchCompleted,
  rewardDelivered,
  rewardDeliveryFailed,
  rewardSent,
} from '../tenant-webhooks/webhook-events';
import { enqueueEvents, outboxInsert } from '../tenant-webhooks/webhook.store';
import {
  type DispatchRow,
  type DispatchStatus,
  type RewardError,
  type RewardRow,
  type RewardStatus,
  type CancelReason,
  type SettledStatus,
  cancelledError,
  countsOf,
  failureOf,
  httpStatusOf,
  iso,
  statusOf,
  totalOf,
} from './dispatch.view';
import { purgeBatch } from '../retention/purge-batch';

/** A change to one reward row, applied only while the reward is unsettled (`pending` / `sending`). */
export interface RewardUpdate {
  position: number;
  status: RewardStatus;
  /** 1 when this write starts an upstream attempt for the reward. */
  bump?: 0 | 1;
  upstream_order_id?: string | null;
  upstream_reward_id?: string | null;
  upstream_order_status?: string | null;
  delivery_status?: string | null;
  link_enc?: string | null;
  last_error?: RewardError | null;
  sent_at?: Date | null;
  next_check_at?: Date | null;
  /** Queued only if the update applies. */
  event?: TenantEventOf<'reward.sent'>;
}

/** The dispatch's end of an attempt, as its columns: settled (derived status) or queued for a retry. */
export interface DispatchUpdate {
  status: DispatchStatus;
  response_status: number;
  last_error: Record<string, unknown> | null;
  next_attempt_at: Date | null;
  sent_at: Date | null;
  /** The attempt made progress: the give-up count starts again (a long batch is not failed for old hiccups). */
  reset_attempts?: boolean;
  /** Queued only if the update applies. */
  event?: TenantEventOf<'dispatch.completed'>;
}

interface WriteItem {
  dispatchId: string;
  rewards: RewardUpdate[];
  dispatch: DispatchUpdate | null;
}

export interface WriteResult {
  /** Positions of the dispatch this statement changed. */
  changed: Set<number>;
  /**
   * Read back only by a write that continues an attempt (else null, false): the connection's status (null when it is
   * gone or the dispatch is no longer held), and whether a cancel was requested.
   */
  connectionStatus: string | null;
  cancelRequested: boolean;
}

/** A dispatch row as the insert takes it. */
export type NewDispatch = Omit<
  DispatchRow,
  'created_at' | 'updated_at' | 'lease_until' | 'cancel_requested_at'
>;

export interface NewReward {
  position: number;
  external_id: string;
  status: RewardStatus;
  payload: unknown;
  attempts: number;
}

/** The dispatch as inserted, or null when its key was taken. */
type Inserted = DispatchRow | null;

interface InsertItem {
  row: NewDispatch;
  rewards: NewReward[];
}

/** A batch of more rewards than this is inserted alone rather than in a shared (group) commit. */
const GROUP_COMMIT_MAX_REWARDS = 100;

/** Rewards read into memory at once: a worker's slice of a batch, and the most a view lists. */
export const REWARD_PAGE = 100;

/** A sent reward whose delivery the service reports (a LINK is handed over: there is nothing to follow). */
const TRACKED = `t.delivery_method IS DISTINCT FROM 'LINK'`;

/**
 * A reward outcome `x` written to the reward `t` (what it leaves null is kept): sent, an EMAIL / PHONE reward's
 * delivery is followed from then on, first checked `delayMs` (a parameter) later.
 */
const OUTCOME = (
  delayMs: string,
) => `status = x.status, upstream_order_status = coalesce(x.upstream_order_status, t.upstream_order_status),
  delivery_status = coalesce(x.delivery_status, t.delivery_status), last_error = x.last_error,
  sent_at = coalesce(x.sent_at, t.sent_at), next_check_at = x.next_check_at, updated_at = now(),
  delivery_state = CASE WHEN x.status = 'sent' AND ${TRACKED} THEN coalesce(t.delivery_state, 'pending') ELSE t.delivery_state END,
  delivery_check_at = CASE WHEN x.status = 'sent' AND ${TRACKED} AND t.delivery_state IS NULL
                           THEN now() + make_interval(secs => ${delayMs}::float8 / 1000) ELSE t.delivery_check_at END`;

/** A cancelled reward's `last_error`, as an SQL literal. */
const cancelled = (why: CancelReason) => `'${JSON.stringify(cancelledError(why))}'`;

const REWARD_COLUMNS = `dispatch_id, position, external_id, status, upstream_payload, attempts, upstream_order_id, upstream_reward_id,
  upstream_order_status, delivery_method, delivery_status, delivery_state, delivery_reason, link_enc, last_error, sent_at`;

/** The statuses of a dispatch every reward of which is settled for good (`pending_approval` may still change). */
const SETTLED = `('sent', 'partially_failed', 'failed', 'cancelled')`;

/** A reward's upstream payload without its recipient's personal data: each recipient field and custom field value null. */
const redactedReward = (p: string) => `${p} || jsonb_build_object(
  'recipient', (SELECT coalesce(jsonb_object_agg(k, NULL::text), '{}') FROM jsonb_object_keys(coalesce(${p}->'recipient', '{}')) k),
  'custom_fields', (SELECT coalesce(jsonb_agg(f || '{"value": null}' ORDER BY n), '[]')
                      FROM jsonb_array_elements(coalesce(${p}->'custom_fields', '[]')) WITH ORDINALITY e(f, n)))`;

/** A dispatch's request with the custom field values of the rewards at `positions` (SQL int[]; all when null) null. */
const redactedRequest = (r: string, positions: string | null) => `jsonb_set(${r}, '{custom_fields}',
  (SELECT coalesce(jsonb_agg(CASE WHEN ${positions ? `(n - 1)::int = ANY(${positions})` : 'true'}
                                  THEN (SELECT coalesce(jsonb_agg(f || '{"value": null}' ORDER BY m), '[]')
                                          FROM jsonb_array_elements(p) WITH ORDINALITY g(f, m))
                                  ELSE p END ORDER BY n), '[]')
     FROM jsonb_array_elements(coalesce(${r}->'custom_fields', '[]')) WITH ORDINALITY e(p, n)))`;

/** A reward's error without what may name the recipient (the service's message, its echo of the payload): the code. */
const redactedError = (e: string) => `CASE WHEN ${e} IS NULL THEN NULL
  ELSE jsonb_strip_nulls(jsonb_build_object('code', ${e}->'code', 'message', 'redacted', 'outcome_unknown', ${e}->'outcome_unknown')) END`;

/** What a redacted dispatch keeps besides its request: the shared payment (a replay derives its answer from the rewards). */
const REDACTED_DISPATCH = `upstream_payload = jsonb_build_object('payment', dd.upstream_payload->'payment'), upstream_order = NULL,
  response_body = NULL`;

/**
 * Every statement of this store, one form each; test/dispatch-plans.e2e-spec.ts EXPLAINs each (few rows and cached,
 * a large history without statistics, analyzed; generic and custom plans). A generic plan made while the tables are
 * small is kept as they grow, so:
 * - every keyed access has its own index condition (`= $n`, `= ANY(...)`) on an index cheaper than the table at any
 *   size: the primary key, or for the rows a sender may still change `dispatch_rewards_open_idx` (rewards `pending` /
 *   `sending`) and `reward_dispatches_sending_idx` (dispatches held) — each statement spells out their predicate;
 * - rows reached one at a time are reached in a subquery of their own (correlated, or LATERAL with its lock), or by
 *   the ctid their lock just took;
 * - a list of keys that drives a join comes from `rg_keyed_records` / `rg_keyed`, estimated at one row (Postgres costs
 *   `= ANY(...)` of a list of unknown length above a scan of a table never analyzed).
 * Lock order: a dispatch before its rewards, in every statement that locks both, so none deadlocks with another.
 */
export const DISPATCH_SQL = {
  /**
   * `$1` the lease in ms; `$2` the dispatches, `$3` their rewards, as JSON arrays of records. A key already taken (or
   * twice in the statement) inserts nothing for that dispatch. Times come back as epoch ms (numbers, not timestamps).
   */
  insert: `WITH d AS (
    INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, order_shape, idempotency_key, request_hash, request,
                                   upstream_payload, status, attempts, lease_until, next_attempt_at, response_status,
                                   reward_count, priority, created_at, updated_at)
    SELECT i.id, i.tenant_id, i.connection_id, i.environment, i.order_shape, i.idempotency_key, i.request_hash, i.request,
           i.upstream_payload, CASE WHEN i.queued THEN 'queued' ELSE 'sending' END, CASE WHEN i.queued THEN 0 ELSE 1 END,
           CASE WHEN i.queued THEN NULL ELSE now() + make_interval(secs => $1::float8 / 1000) END,
           CASE WHEN i.queued THEN now() + make_interval(secs => i.due_ms / 1000) END, CASE WHEN i.queued THEN 202 END,
           i.reward_count, i.priority, now(), now()
      FROM jsonb_to_recordset($2::jsonb) AS i(id uuid, tenant_id text, connection_id uuid, environment text, order_shape text,
                idempotency_key text, request_hash text, request jsonb, upstream_payload jsonb, queued boolean, priority int,
                reward_count int, due_ms float8)
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING id, created_at, lease_until
  ), r AS (
    INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload, attempts, delivery_method)
    SELECT x.dispatch_id, x.position, x.external_id, x.status, x.payload, x.attempts, x.payload->'delivery'->>'method'
      FROM jsonb_to_recordset($3::jsonb)
           AS x(dispatch_id uuid, position int, external_id text, status text, payload jsonb, attempts int)
     WHERE x.dispatch_id IN (SELECT id FROM d)
  )
  SELECT id, (extract(epoch FROM created_at) * 1000)::float8 AS created_ms,
         (extract(epoch FROM lease_until) * 1000)::float8 AS lease_ms
    FROM d`,

  /**
   * `$1` the lease in ms, `$2` the delivery reconciliation delay in ms; `$3` one record per dispatch (`w`: its end of
   * attempt, or none to extend its lease), `$4` the reward updates (`x`), via `rg_keyed_records` so one generic plan
   * fits one send and a group of sixty. Only rewards still open change, only dispatches still held; `r` waits for all
   * of `d` (the lock order). Each record's `event` is queued only if its row changed: a real transition, once.
   */
  write: `WITH w AS (
    SELECT w.* FROM rg_keyed_records($3::jsonb) e,
           jsonb_to_record(e) AS w(dispatch_id uuid, status text, response_status int, last_error jsonb,
                                   next_attempt_at timestamptz, sent_at timestamptz, reset_attempts boolean, event jsonb)
  ), x AS (
    SELECT x.* FROM rg_keyed_records($4::jsonb) e,
           jsonb_to_record(e) AS x(dispatch_id uuid, position int, status text, bump int, upstream_order_id text,
                                   upstream_reward_id text, upstream_order_status text, delivery_status text, link_enc text,
                                   last_error jsonb, sent_at timestamptz, next_check_at timestamptz, event jsonb)
  ), d AS (
    UPDATE reward_dispatches dd
       SET status = coalesce(w.status, dd.status), response_status = coalesce(dd.response_status, w.response_status),
           last_error = CASE WHEN w.status IS NULL THEN dd.last_error ELSE w.last_error END,
           next_attempt_at = CASE WHEN w.status IS NULL THEN dd.next_attempt_at ELSE w.next_attempt_at END,
           sent_at = coalesce(dd.sent_at, w.sent_at),
           lease_until = CASE WHEN w.status IS NULL THEN now() + make_interval(secs => $1::float8 / 1000) END,
           attempts = CASE WHEN w.reset_attempts THEN 0 ELSE dd.attempts END, updated_at = now()
      FROM (SELECT w.*, k.row_id FROM w,
                   LATERAL (SELECT ctid AS row_id FROM reward_dispatches
                             WHERE id = w.dispatch_id AND status = 'sending' FOR NO KEY UPDATE) k) w
     WHERE dd.ctid = w.row_id AND dd.status = 'sending'
    RETURNING dd.id, dd.connection_id, dd.cancel_requested_at IS NOT NULL AS cancel_requested
  ), r AS (
    UPDATE dispatch_rewards t
       SET ${OUTCOME('$2')}, attempts = t.attempts + coalesce(x.bump, 0),
           upstream_order_id = coalesce(x.upstream_order_id, t.upstream_order_id),
           upstream_reward_id = coalesce(x.upstream_reward_id, t.upstream_reward_id), link_enc = coalesce(x.link_enc, t.link_enc)
      FROM (SELECT x.*, k.row_id FROM x,
                   LATERAL (SELECT ctid AS row_id FROM dispatch_rewards
                             WHERE dispatch_id = x.dispatch_id AND position = x.position AND status IN ('pending', 'sending')
                               FOR NO KEY UPDATE) k) x
     WHERE t.ctid = x.row_id AND t.status IN ('pending', 'sending') AND (SELECT count(*) FROM d) >= 0
    RETURNING t.dispatch_id, t.position
  ), queued AS (
    ${outboxInsert(`SELECT x.event FROM x JOIN r ON r.dispatch_id = x.dispatch_id AND r.position = x.position
                     WHERE x.event IS NOT NULL
                    UNION ALL
                    SELECT w.event FROM w JOIN d ON d.id = w.dispatch_id WHERE w.event IS NOT NULL`)}
  )
  SELECT w.dispatch_id, (SELECT array_agg(r.position) FROM r WHERE r.dispatch_id = w.dispatch_id) AS changed,
         CASE WHEN w.status IS NULL THEN (SELECT c.status FROM connections c WHERE c.id = d.connection_id) END AS connection_status,
         CASE WHEN w.status IS NULL THEN d.cancel_requested END AS cancel_requested
    FROM w LEFT JOIN d ON d.id = w.dispatch_id`,

  /** Takes a dispatch for a transaction that derives its status, with what its tenant events say of it. */
  lock: `SELECT id, tenant_id, environment, idempotency_key, request->>'external_reference' AS external_reference, created_at,
                status FROM reward_dispatches WHERE id = $1 FOR NO KEY UPDATE`,

  /**
   * Every reward of the dispatch still open ends `$2` with the error `$3`: `failed` on a give-up (an unknown outcome is
   * said so), `cancelled` when the connection is gone (see claimDue).
   */
  closeOpen: `UPDATE dispatch_rewards SET status = $2::text, updated_at = now(),
                     last_error = $3::jsonb || CASE WHEN $2::text = 'failed'
                                                    THEN jsonb_build_object('outcome_unknown', status = 'sending') ELSE '{}' END
               WHERE dispatch_id = $1 AND status IN ('pending', 'sending')`,

  /** What a dispatch's status is derived from: its rewards per status, their failure codes, the last send. */
  summary: `SELECT status, count(*)::int AS n, max(sent_at) AS sent_at,
                   array_agg(DISTINCT last_error->>'code') FILTER (WHERE status IN ('failed', 'cancelled')) AS codes
              FROM dispatch_rewards WHERE dispatch_id = $1 GROUP BY status`,

  /** The end of a worker's attempt (see settle): `$2` the derived status (`queued` while rewards are open). */
  settle: `UPDATE reward_dispatches
              SET status = $2::text, lease_until = NULL, updated_at = now(),
                  next_attempt_at = CASE WHEN $2::text = 'queued' THEN now() END,
                  sent_at = coalesce(sent_at, $3::timestamptz), response_status = coalesce(response_status, $4::int),
                  last_error = $5::jsonb
            WHERE id = $1`,

  cancel: `WITH d AS (
    UPDATE reward_dispatches SET cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
     WHERE tenant_id = $1 AND id = $2 AND status IN ('queued', 'sending')
     RETURNING id
  ), r AS (
    UPDATE dispatch_rewards t SET status = 'cancelled', updated_at = now(),
           last_error = ${cancelled('requested')}
     WHERE t.dispatch_id = $2 AND t.status = 'pending' AND EXISTS (SELECT 1 FROM d)
  )
  SELECT id FROM d`,

  /** A dispatch no live sender holds (queued, or its holder's lease expired), with its rewards still open. */
  idle: `SELECT (SELECT count(*)::int FROM dispatch_rewards WHERE dispatch_id = $1 AND status IN ('pending', 'sending')) AS open
           FROM reward_dispatches WHERE id = $1 AND (status = 'queued' OR lease_until < now())`,

  openRewards: `SELECT ${REWARD_COLUMNS} FROM dispatch_rewards
                 WHERE dispatch_id = $1 AND position > $2 AND status IN ('pending', 'sending') ORDER BY position LIMIT $3`,

  countsOf: `SELECT d.id AS dispatch_id, c.status, c.n
               FROM unnest($1::uuid[]) AS d(id),
                    LATERAL (SELECT status, count(*)::int AS n FROM dispatch_rewards WHERE dispatch_id = d.id GROUP BY status) c`,

  discard: `DELETE FROM reward_dispatches WHERE id = $1 AND status = 'sending' AND attempts = 1`,

  findByKey: `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND idempotency_key = $2`,

  find: `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND id = $2`,

  list: `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)
          ORDER BY created_at DESC, id LIMIT $3 OFFSET $4`,

  rewardsOf: `SELECT r.* FROM unnest($1::uuid[]) AS d(id),
                     LATERAL (SELECT ${REWARD_COLUMNS} FROM dispatch_rewards
                               WHERE dispatch_id = d.id AND position >= $3 ORDER BY position LIMIT $2) r`,

  /** From the two partial indexes (queued, due; held, lease expired); `gone`: disconnected (no attempt counted). */
  claimDue: `WITH ready AS (
    SELECT d.id, d.priority, d.due, row_number() OVER (PARTITION BY d.connection_id ORDER BY d.priority, d.due) AS turn
      FROM (SELECT id, connection_id, priority, coalesce(next_attempt_at, lease_until) AS due FROM reward_dispatches
             WHERE status = 'queued' AND next_attempt_at <= now()
            UNION ALL
            SELECT id, connection_id, priority, coalesce(next_attempt_at, lease_until) FROM reward_dispatches
             WHERE status = 'sending' AND lease_until < now()) d
     WHERE NOT (d.priority = 0 AND d.connection_id = ANY($3::uuid[]))
       AND NOT (d.priority = 1 AND d.connection_id = ANY($4::uuid[]))
  ), candidates AS (
    SELECT id FROM ready WHERE turn = 1 ORDER BY priority, due LIMIT $2
  ), due AS (
    SELECT d.id, (c.id IS NULL OR c.status = 'disconnected') AS gone
      FROM candidates k,
           LATERAL (SELECT id, connection_id FROM reward_dispatches
                     WHERE id = k.id
                       AND ((status = 'queued' AND next_attempt_at <= now()) OR (status = 'sending' AND lease_until < now()))
                       FOR UPDATE SKIP LOCKED) d
           LEFT JOIN connections c ON c.id = d.connection_id
  )
  UPDATE reward_dispatches d
     SET status = 'sending', attempts = d.attempts + CASE WHEN due.gone THEN 0 ELSE 1 END, updated_at = now(),
         lease_until = now() + make_interval(secs => $1::float8 / 1000)
    FROM due
   WHERE d.id = due.id
   RETURNING d.*, due.gone`,

  /** A delivery outcome, returning what its tenant event says and the state it replaced (`prev`, under the lock). */
  recordDelivery: `WITH prev AS (
    SELECT dispatch_id, position, delivery_state FROM dispatch_rewards WHERE upstream_reward_id = $1 FOR NO KEY UPDATE
  )
  UPDATE dispatch_rewards r
     SET delivery_state = $3, delivery_status = $4, delivery_reason = $5, delivery_event_at = $6,
         delivery_check_at = CASE WHEN $3 = 'pending' THEN r.delivery_check_at END, updated_at = now()
    FROM prev, reward_dispatches d
   WHERE r.upstream_reward_id = $1 AND r.dispatch_id = prev.dispatch_id AND r.position = prev.position
     AND d.id = r.dispatch_id AND d.connection_id = ANY($2::uuid[])
     AND r.status IN ('sent', 'pending_approval')
     AND (r.delivery_event_at IS NULL OR r.delivery_event_at < $6
          OR (r.delivery_event_at = $6 AND r.delivery_state = 'pending'))
     AND NOT ($3 = 'pending' AND r.delivery_state IN ('delivered', 'delivery_failed'))
     AND (r.delivery_state IS DISTINCT FROM $3 OR r.delivery_status IS DISTINCT FROM $4)
   RETURNING r.dispatch_id, r.position, d.tenant_id, d.environment, d.idempotency_key, r.external_id, r.status,
             r.upstream_reward_id, r.upstream_order_id, r.delivery_method, r.delivery_status, r.delivery_reason,
             r.delivery_event_at, prev.delivery_state AS previous_state`,

  /** Due checks, locked (SKIP LOCKED) and updated through their `ctid` (a TID scan, whatever the estimates). */
  claimDeliveryChecks: `UPDATE dispatch_rewards r SET delivery_check_at = now() + make_interval(secs => $2::float8 / 1000)
                          FROM (SELECT ctid AS row_id, (SELECT connection_id FROM reward_dispatches d WHERE d.id = dispatch_id)
                                  FROM dispatch_rewards
                                 WHERE delivery_check_at <= now() ORDER BY delivery_check_at LIMIT $1 FOR UPDATE SKIP LOCKED) due
                         WHERE r.ctid = due.row_id AND r.upstream_reward_id IS NOT NULL AND due.connection_id IS NOT NULL
                         RETURNING r.dispatch_id, r.position, r.upstream_reward_id, due.connection_id`,

  stopDeliveryCheck: `UPDATE dispatch_rewards SET delivery_check_at = NULL WHERE dispatch_id = $1 AND position = $2`,

  claimApprovalCheck: `UPDATE dispatch_rewards r SET next_check_at = now() + make_interval(secs => $1::float8 / 1000)
                         FROM (SELECT dispatch_id, position FROM dispatch_rewards
                                WHERE status = 'pending_approval' AND next_check_at <= now()
                                ORDER BY next_check_at LIMIT 1 FOR UPDATE SKIP LOCKED) due, reward_dispatches d
                        WHERE r.dispatch_id = due.dispatch_id AND r.position = due.position AND d.id = r.dispatch_id
                        RETURNING ${REWARD_COLUMNS.split(',')
                          .map((c) => `r.${c.trim()}`)
                          .join(', ')}, d.connection_id`,

  /** A reward held for approval takes its outcome (`$2`–`$8`), or its next check (still `pending_approval`). */
  settleApproval: `UPDATE dispatch_rewards t
                      SET ${OUTCOME('$9')}
                     FROM (SELECT $3::text AS status, $4::text AS upstream_order_status, $5::text AS delivery_status,
                                  $6::jsonb AS last_error, $7::timestamptz AS sent_at, $8::timestamptz AS next_check_at) x
                    WHERE t.dispatch_id = $1 AND t.position = $2 AND t.status = 'pending_approval'
                    RETURNING t.position, t.external_id, t.upstream_reward_id, t.upstream_order_id, t.upstream_order_status,
                              t.delivery_method, t.sent_at`,

  /** The status derived once the approval outcome is in (`$3`: a reward was sent by it). */
  approvalSettled: `UPDATE reward_dispatches
                       SET status = $2, sent_at = CASE WHEN $3::boolean THEN coalesce(sent_at, now()) ELSE sent_at END, updated_at = now()
                     WHERE id = $1 AND status IN ('pending_approval', 'partially_failed')`,

  /** From each tenant's `reward_dispatches_tenant_idx` (no index of its own to keep up on every send). */
  expire: `WITH k AS (
    SELECT o.row_id FROM tenants t,
           LATERAL (SELECT ctid AS row_id FROM reward_dispatches
                     WHERE tenant_id = t.id AND created_at < $1 AND status IN ${SETTLED}
                     ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) o
     LIMIT $2
  )
  DELETE FROM reward_dispatches d
   USING rg_keyed(ARRAY(SELECT row_id FROM k)) AS l(row_id)
   WHERE d.ctid = l.row_id AND d.created_at < $1 AND d.status IN ${SETTLED}`,

  /**
   * Oldest first from `reward_dispatches_unredacted_idx`: recipient fields and custom field values null, LINK links
   * dropped; ids, amounts, statuses and the request hash stay, so a replayed Idempotency-Key still answers.
   */
  redact: `WITH k AS (
    SELECT ctid AS row_id FROM reward_dispatches
     WHERE redacted_at IS NULL AND created_at < $1 AND status IN ${SETTLED}
     ORDER BY created_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED
  ), d AS (
    UPDATE reward_dispatches dd
       SET request = ${redactedRequest('dd.request', null)}, ${REDACTED_DISPATCH}, redacted_at = now()
     WHERE dd.ctid = ANY(ARRAY(SELECT row_id FROM k)) AND dd.redacted_at IS NULL AND dd.created_at < $1
       AND dd.status IN ${SETTLED}
    RETURNING dd.id
  ), r AS (
    UPDATE dispatch_rewards t
       SET upstream_payload = ${redactedReward('t.upstream_payload')}, link_enc = NULL, last_error = ${redactedError('t.last_error')}
      FROM (SELECT x.row_id FROM d,
                   LATERAL (SELECT ctid AS row_id FROM dispatch_rewards WHERE dispatch_id = d.id FOR NO KEY UPDATE) x) k
     WHERE t.ctid = k.row_id
    RETURNING 1
  )
  SELECT (SELECT count(*)::int FROM d) AS dispatches, (SELECT count(*)::int FROM r) AS rewards`,

  purgeTenant: `DELETE FROM reward_dispatches d
                 USING (SELECT ctid AS row_id FROM reward_dispatches WHERE tenant_id = $1
                         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) k
                 WHERE d.ctid = k.row_id`,

  /**
   * One page: up to `$6` dispatches before the cursor (`$4` created_at, `$5` id), newest first. A reward not sent yet
   * is cancelled instead of being sent to no one. Returns the counts and the next cursor.
   */
  eraseRecipient: `WITH page AS (
    SELECT id, created_at FROM reward_dispatches
     WHERE tenant_id = $1 AND created_at <= $4::timestamptz AND (created_at < $4::timestamptz OR id < $5::uuid)
     ORDER BY created_at DESC, id DESC LIMIT $6
  ), hit AS (
    SELECT r.dispatch_id, r.position FROM page p,
           LATERAL (SELECT dispatch_id, position, upstream_payload FROM dispatch_rewards WHERE dispatch_id = p.id OFFSET 0) r
     WHERE lower(r.upstream_payload->'recipient'->>'email') = $2
        OR regexp_replace(r.upstream_payload->'recipient'->>'phone', '[^0-9+]', '', 'g') = $3
  ), d AS (
    UPDATE reward_dispatches dd
       SET request = ${redactedRequest('dd.request', 'ARRAY(SELECT h.position FROM hit h WHERE h.dispatch_id = dd.id)')},
           ${REDACTED_DISPATCH}, updated_at = now()
      FROM (SELECT x.row_id FROM (SELECT DISTINCT dispatch_id FROM hit) h,
                   LATERAL (SELECT ctid AS row_id FROM reward_dispatches WHERE id = h.dispatch_id FOR NO KEY UPDATE) x) k
     WHERE dd.ctid = k.row_id
    RETURNING dd.id
  ), r AS (
    UPDATE dispatch_rewards t
       SET upstream_payload = ${redactedReward('t.upstream_payload')}, link_enc = NULL, updated_at = now(),
           status = CASE WHEN t.status = 'pending' THEN 'cancelled' ELSE t.status END,
           last_error = CASE WHEN t.status = 'pending'
                             THEN ${cancelled('erased')}::jsonb
                             ELSE ${redactedError('t.last_error')} END
      FROM (SELECT x.row_id FROM hit h,
                   LATERAL (SELECT ctid AS row_id FROM dispatch_rewards
                             WHERE dispatch_id = h.dispatch_id AND position = h.position FOR NO KEY UPDATE) x) k
     WHERE t.ctid = k.row_id AND (SELECT count(*) FROM d) >= 0
    RETURNING 1
  )
  SELECT (SELECT count(*)::int FROM d) AS dispatches, (SELECT count(*)::int FROM r) AS rewards,
         (SELECT count(*)::int FROM page) AS seen,
         (SELECT p.created_at::text AS at FROM page p ORDER BY p.created_at, p.id LIMIT 1) AS last_at,
         (SELECT id FROM page ORDER BY created_at, id LIMIT 1) AS last_id`,
} as const;

/** A JSON value as a parameter (null stays SQL NULL). */
const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value));

/** A dispatch held by a settling transaction (DISPATCH_SQL.lock). */
type LockedDispatch = DispatchFacts & {
  external_reference: string | null;
  created_at: Date;
  status: DispatchStatus;
};

/** The rewards of a dispatch per status, the failure codes among them, and the last time one was sent. */
interface Summary {
  counts: Record<RewardStatus, number>;
  codes: string[];
  sentAt: Date | null;
}

/** How a settling transaction ends a dispatch (see close). */
type Outcome = Pick<DispatchUpdate, 'sent_at' | 'response_status'> & {
  status: SettledStatus | 'queued';
  last_error: { code: string; message: string } | null;
};

async function summaryOf(sql: Sql, dispatchId: string): Promise<Summary> {
  const { rows } = await sql.query<{
    status: RewardStatus;
    n: number;
    sent_at: Date | null;
    codes: (string | null)[] | null;
  }>(DISPATCH_SQL.summary, [dispatchId]);
  return {
    counts: countsOf(rows),
    codes: rows.flatMap((r) => r.codes ?? []).map((code) => code ?? 'upstream_rejected'),
    sentAt: rows.reduce<Date | null>(
      (last, r) => (r.sent_at && (!last || r.sent_at > last) ? r.sent_at : last),
      null,
    ),
  };
}

type DeliveryCheck = {
  dispatch_id: string;
  position: number;
  upstream_reward_id: string;
  connection_id: string;
};

/**
 * Every statement that reads or writes `reward_dispatches` and `dispatch_rewards`. The insert before the first upstream
 * call is synchronous (it is the record that the request was accepted). Writes whose loss is harmless use asynchronous
 * commit: lost, a reward falls back to `sending`, its lease expires and it is re-sent with the same external_id, which
 * the rewards service answers with the original order. A write that fails a reward is always synchronous: re-sent, a
 * refused order might go through (funds added since) after the caller was told it failed.
 */
@Injectable()
export class DispatchStore {
  private readonly relaxedWrites = new GroupCommit<WriteItem, WriteResult>((items) =>
    this.writeAll(this.db.relaxed, items),
  );
  private readonly durableWrites = new GroupCommit<WriteItem, WriteResult>((items) =>
    this.writeAll(this.db.main, items),
  );
  /** Interactive inserts of concurrent requests share one statement and one commit. */
  private readonly inserts = new GroupCommit<InsertItem, Inserted>((items) => this.insertAll(items));

  constructor(
    @InjectConfig('dispatch') private readonly config: DispatchConfig,
    private readonly db: Database,
    private readonly clock: Clock,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  /**
   * The dispatch and its rewards in one statement, keyed by tenant + Idempotency-Key: the dispatch as written, or null
   * when the key is taken (nothing written). `queued`: due now (or at its `next_attempt_at`), for the workers, answered
   * 202; `sending`: held by the request for its lease. A batch's large insert goes alone, never holding up shared commits.
   */
  async insert(row: NewDispatch, rewards: NewReward[]): Promise<Inserted> {
    const item = { row, rewards };
    return rewards.length <= GROUP_COMMIT_MAX_REWARDS
      ? this.inserts.submit(item)
      : (await this.insertAll([item]))[0];
  }

  private async insertAll(items: InsertItem[]): Promise<Inserted[]> {
    const dispatches = items.map(({ row, rewards }) => ({
      ...row,
      queued: row.status === 'queued',
      reward_count: rewards.length,
      due_ms: row.next_attempt_at
        ? Math.max(0, new Date(row.next_attempt_at).getTime() - this.clock.now())
        : 0,
    }));
    const rewards = items.flatMap(({ row, rewards }) => rewards.map((r) => ({ ...r, dispatch_id: row.id })));
    const { rows } = await this.db.main.query<{ id: string; created_ms: number; lease_ms: number | null }>({
      name: 'rg_dispatch_insert',
      text: DISPATCH_SQL.insert,
      values: [this.config.leaseMs, JSON.stringify(dispatches), JSON.stringify(rewards)],
    });
    this.metrics?.insertBatch.observe(items.length);
    const byId = new Map(rows.map((r) => [r.id, r]));
    return items.map(({ row }) => {
      const r = byId.get(row.id);
      if (!r) return null;
      return {
        ...row,
        created_at: new Date(r.created_ms),
        updated_at: new Date(r.created_ms),
        lease_until: r.lease_ms === null ? null : new Date(r.lease_ms),
        cancel_requested_at: null,
        response_status: row.status === 'queued' ? 202 : null,
      };
    });
  }

  /**
   * Reward changes and the dispatch's progress in one statement. Without `dispatch`, the lease is extended and what a
   * sender checks before its next call is read back (WriteResult); with it, the dispatch ends this attempt.
   */
  async write(
    dispatchId: string,
    rewards: RewardUpdate[],
    dispatch: DispatchUpdate | null,
  ): Promise<WriteResult> {
    const durable = [...rewards, dispatch].some((u) => u?.status === 'failed' || u?.status === 'cancelled');
    return (durable ? this.durableWrites : this.relaxedWrites).submit({ dispatchId, rewards, dispatch });
  }

  /** Two writes of one dispatch share a statement only as lease extensions (lanes of one attempt): one record. */
  private async writeAll(pool: Pool, items: WriteItem[]): Promise<WriteResult[]> {
    const byDispatch = new Map<string, DispatchUpdate | null>();
    for (const i of items) byDispatch.set(i.dispatchId, byDispatch.get(i.dispatchId) ?? i.dispatch);
    const { rows } = await pool.query<{
      dispatch_id: string;
      changed: number[] | null;
      connection_status: string | null;
      cancel_requested: boolean | null;
    }>({
      name: 'rg_dispatch_write',
      text: DISPATCH_SQL.write,
      values: [
        this.config.leaseMs,
        this.config.deliveryReconcileAfterMs,
        JSON.stringify([...byDispatch].map(([id, d]) => ({ ...d, dispatch_id: id }))),
        JSON.stringify(items.flatMap((i) => i.rewards.map((r) => ({ ...r, dispatch_id: i.dispatchId })))),
      ],
    });
    const byId = new Map(rows.map((row) => [row.dispatch_id, row]));
    return items.map((item) => {
      const row = byId.get(item.dispatchId);
      return {
        changed: new Set(row?.changed ?? []),
        connectionStatus: item.dispatch ? null : (row?.connection_status ?? null),
        cancelRequested: item.dispatch ? false : (row?.cancel_requested ?? false),
      };
    });
  }

  /**
   * Ends a worker's attempt whose rewards are all settled (maybe more than it held in memory): the status derived from
   * the stored rewards (statusOf). With `giveUp`, every reward still open fails first with that reason. A dispatch
   * with open rewards left (none should) is queued again, due now.
   */
  async settle(dispatchId: string, giveUp: RewardError | null = null): Promise<void> {
    const open = giveUp && { status: 'failed' as const, error: giveUp };
    await this.close(dispatchId, open, ({ counts, codes, sentAt: sent_at }) => {
      const status = statusOf(counts) ?? 'queued';
      const failure = status === 'failed' || status === 'cancelled' ? failureOf(status, codes) : null;
      const total = totalOf(counts);
      return {
        status,
        sent_at,
        response_status: failure?.status ?? httpStatusOf(status),
        last_error: failure && {
          code: failure.code,
          message:
            total === 1
              ? 'The reward was not sent; see the reward.'
              : `None of the ${total} rewards was sent; see each reward.`,
        },
      };
    });
  }

  /**
   * A dispatch claimed after its connection was disconnected (see claimDue): what was not sent is cancelled, and the
   * dispatch ends `cancelled`, or `partially_failed` when some of it went out before.
   */
  private async cancelDisconnected(dispatchId: string): Promise<void> {
    const error = cancelledError('disconnected');
    await this.close(dispatchId, { status: 'cancelled', error }, ({ counts }) => ({
      status: counts.sent + counts.pending_approval > 0 ? 'partially_failed' : 'cancelled',
      sent_at: null,
      response_status: 409,
      last_error: {
        code: 'dispatch_cancelled',
        message: 'The rewards connection was disconnected; what was not sent was cancelled.',
      },
    }));
  }

  /**
   * A settling transaction, holding the dispatch while it is open (a reward settled meanwhile by the approval checks
   * is counted, not missed): ends the rewards still open as `open` says, then writes the outcome derived from the stored
   * rewards and, when settled, queues its `dispatch.completed` event with these counts.
   */
  private async close(
    dispatchId: string,
    open: { status: 'failed' | 'cancelled'; error: RewardError } | null,
    outcome: (summary: Summary) => Outcome,
  ): Promise<void> {
    await this.db.transaction(async (tx) => {
      const [dispatch] = (await tx.query<LockedDispatch>(DISPATCH_SQL.lock, [dispatchId])).rows;
      if (dispatch?.status !== 'sending' && dispatch?.status !== 'queued') return;
      if (open) await tx.query(DISPATCH_SQL.closeOpen, [dispatchId, open.status, JSON.stringify(open.error)]);
      const summary = await summaryOf(tx, dispatchId);
      const { status, sent_at, response_status, last_error } = outcome(summary);
      await tx.query(DISPATCH_SQL.settle, [
        dispatchId,
        status,
        iso(sent_at),
        response_status,
        json(last_error),
      ]);
      if (status === 'queued') return;
      const data = { status, counts: summary.counts, error_code: last_error?.code ?? null };
      await enqueueEvents(tx, [dispatchCompleted(dispatch, data, new Date(this.clock.now()))]);
    });
  }

  /**
   * `POST …/dispatches/{id}/cancel`: every reward not sent yet (`pending`) ends `cancelled` at once; one already on its
   * way (`sending`) finishes. A dispatch no live sender holds is settled here; one being sent is settled by its sender,
   * which sees the request at its next write. False when the dispatch was already settled.
   */
  async cancel(tenantId: string, dispatchId: string): Promise<boolean> {
    const { rows } = await this.db.main.query<{ id: string }>(DISPATCH_SQL.cancel, [tenantId, dispatchId]);
    if (!rows.length) return false;
    const { rows: idle } = await this.db.main.query<{ open: number }>(DISPATCH_SQL.idle, [dispatchId]);
    if (idle[0] && idle[0].open === 0) await this.settle(dispatchId);
    return true;
  }

  /** Up to `limit` rewards of a dispatch not settled yet, after `afterPosition`, in position order: one slice. */
  async openRewards(dispatchId: string, afterPosition: number, limit = REWARD_PAGE): Promise<RewardRow[]> {
    return (await this.db.main.query<RewardRow>(DISPATCH_SQL.openRewards, [dispatchId, afterPosition, limit]))
      .rows;
  }

  async countsOf(dispatchIds: string[]): Promise<Map<string, Record<RewardStatus, number>>> {
    const { rows } = await this.db.main.query<{ dispatch_id: string; status: RewardStatus; n: number }>(
      DISPATCH_SQL.countsOf,
      [dispatchIds],
    );
    return new Map(dispatchIds.map((id) => [id, countsOf(rows.filter((r) => r.dispatch_id === id))]));
  }

  /**
   * Forgets a dispatch nothing of which reached the rewards service (its first call could not get a token): the caller
   * may retry the same Idempotency-Key later. Only while this process still holds it.
   */
  async discard(dispatchId: string): Promise<void> {
    await this.db.main.query(DISPATCH_SQL.discard, [dispatchId]);
  }

  async findByKey(tenantId: string, key: string): Promise<DispatchRow | null> {
    return (await this.db.main.query<DispatchRow>(DISPATCH_SQL.findByKey, [tenantId, key])).rows[0] ?? null;
  }

  async find(tenantId: string, id: string): Promise<DispatchRow | null> {
    return (await this.db.main.query<DispatchRow>(DISPATCH_SQL.find, [tenantId, id])).rows[0] ?? null;
  }

  async list(
    tenantId: string,
    status: string | undefined,
    limit: number,
    offset: number,
  ): Promise<DispatchRow[]> {
    const values = [tenantId, status ?? null, limit, offset];
    return (await this.db.main.query<DispatchRow>(DISPATCH_SQL.list, values)).rows;
  }

  /** The rewards of the given dispatches, by dispatch, in position order: at most `limit` each from `offset`. */
  async rewardsOf(dispatchIds: string[], limit = REWARD_PAGE, offset = 0): Promise<Map<string, RewardRow[]>> {
    const values = [dispatchIds, limit, offset];
    const { rows } = await this.db.main.query<RewardRow>(DISPATCH_SQL.rewardsOf, values);
    const byDispatch = new Map<string, RewardRow[]>(dispatchIds.map((id) => [id, []]));
    for (const r of rows) byDispatch.get(r.dispatch_id)?.push(r);
    return byDispatch;
  }

  /**
   * The worker's claim: due retries, due batch slices, and dispatches whose holder died (lease expired), one instance
   * each. Fair: at most one dispatch per connection per claim, accounts whose oldest due work is oldest first,
   * interactive before bulk, never a connection this instance is already busy with at that priority. A dispatch whose
   * connection was disconnected is not sent but ends here (cancelDisconnected).
   */
  async claimDue(
    limit: number,
    busyInteractive: string[] = [],
    busyBulk: string[] = [],
  ): Promise<DispatchRow[]> {
    const { rows } = await this.db.main.query<DispatchRow & { gone: boolean }>({
      name: 'rg_dispatch_claim',
      text: DISPATCH_SQL.claimDue,
      values: [this.config.leaseMs, limit, busyInteractive, busyBulk],
    });
    const claimed: DispatchRow[] = [];
    for (const { gone, ...row } of rows) {
      if (gone) await this.cancelDisconnected(row.id);
      else claimed.push(row);
    }
    return claimed;
  }

  /**
   * A delivery outcome for the reward the service knows as `upstreamRewardId` (a webhook or reconciliation), among
   * the account's connections: idempotent and order-proof (not applied when older than the state recorded, and a
   * final state is never replaced by `pending`). A final state new for the reward queues its tenant event in the same
   * transaction. Returns the reward changed, or null.
   */
  async recordDelivery(
    upstreamRewardId: string,
    accountConnectionIds: string[],
    outcome: {
      state: 'pending' | 'delivered' | 'delivery_failed';
      status: string;
      reason: string | null;
      eventAt: Date;
    },
  ): Promise<{ dispatch_id: string; position: number; tenant_id: string } | null> {
    const { state, status, reason, eventAt } = outcome;
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<
        DeliveryFacts & Omit<DispatchFacts, 'id'> & { dispatch_id: string; previous_state: string | null }
      >({
        name: 'rg_dispatch_record_delivery',
        text: DISPATCH_SQL.recordDelivery,
        values: [upstreamRewardId, accountConnectionIds, state, status, reason, eventAt],
      });
      const reward = rows[0];
      if (!reward) return null;
      const dispatch = { ...reward, id: reward.dispatch_id };
      const at = new Date(this.clock.now());
      if (state !== 'pending' && reward.previous_state !== state)
        await enqueueEvents(tx, [
          state === 'delivered'
            ? rewardDelivered(dispatch, reward, at)
            : rewardDeliveryFailed(dispatch, reward, at),
        ]);
      return { dispatch_id: reward.dispatch_id, position: reward.position, tenant_id: reward.tenant_id };
    });
  }

  /** Claims up to `limit` sent rewards whose delivery check is due, pushing the next one out by `nextCheckMs`. */
  async claimDeliveryChecks(limit: number, nextCheckMs: number): Promise<DeliveryCheck[]> {
    return (await this.db.main.query<DeliveryCheck>(DISPATCH_SQL.claimDeliveryChecks, [limit, nextCheckMs]))
      .rows;
  }

  /** Stops polling a reward (its connection is gone, or the service does not know it). */
  async stopDeliveryCheck(dispatchId: string, position: number): Promise<void> {
    await this.db.main.query(DISPATCH_SQL.stopDeliveryCheck, [dispatchId, position]);
  }

  /** Claims one reward held for approval whose check is due, pushing the next one out by the lease (crash-safe). */
  async claimApprovalCheck(): Promise<(RewardRow & { connection_id: string | null }) | null> {
    const { rows } = await this.db.main.query<RewardRow & { connection_id: string | null }>(
      DISPATCH_SQL.claimApprovalCheck,
      [this.config.leaseMs],
    );
    return rows[0] ?? null;
  }

  /**
   * Settles (or re-schedules) a reward held for approval. Settled, its dispatch's status is derived again (statusOf)
   * in the same transaction, which holds the dispatch so that two rewards settled at once both count; sent, its
   * `reward.sent` event is queued in it.
   */
  async settleApproval(dispatchId: string, update: RewardUpdate): Promise<void> {
    const values = [
      dispatchId,
      update.position,
      update.status,
      update.upstream_order_status ?? null,
      update.delivery_status ?? null,
      json(update.last_error),
      iso(update.sent_at),
      iso(update.next_check_at),
      this.config.deliveryReconcileAfterMs,
    ];
    // Checked again later: nothing the dispatch's status depends on changed.
    if (update.status === 'pending_approval') {
      await this.db.main.query(DISPATCH_SQL.settleApproval, values);
      return;
    }
    await this.db.transaction(async (tx) => {
      const [dispatch] = (await tx.query<DispatchFacts>(DISPATCH_SQL.lock, [dispatchId])).rows;
      const [reward] = (
        await tx.query<RewardFacts & { upstream_order_status: string | null; sent_at: Date | null }>(
          DISPATCH_SQL.settleApproval,
          values,
        )
      ).rows;
      if (!dispatch || !reward) return;
      const status = statusOf((await summaryOf(tx, dispatchId)).counts);
      if (status)
        await tx.query(DISPATCH_SQL.approvalSettled, [dispatchId, status, update.status === 'sent']);
      if (update.status === 'sent')
        await enqueueEvents(tx, [rewardSent(dispatch, reward, new Date(this.clock.now()))]);
    });
  }

  /** Retention: deletes up to `limit` settled dispatches created before `olderThan` (with their rewards). */
  expire(olderThan: Date, limit: number): Promise<number> {
    return purgeBatch(this.db.main, DISPATCH_SQL.expire, olderThan, limit);
  }

  /** Retention: redacts the recipients of up to `limit` settled dispatches created before `olderThan`. */
  async redact(olderThan: Date, limit: number): Promise<number> {
    const { rows } = await this.db.main.query<{ dispatches: number }>(DISPATCH_SQL.redact, [
      olderThan,
      limit,
    ]);
    return rows[0]?.dispatches ?? 0;
  }

  /** A deleted tenant: removes up to `limit` of its dispatches (with their rewards). */
  purgeTenant(tenantId: string, limit: number): Promise<number> {
    return purgeBatch(this.db.main, DISPATCH_SQL.purgeTenant, tenantId, limit);
  }

  /**
   * Erasure: redacts one recipient (`email`, compared in lower case, or `phone`, by its digits and `+`) in every
   * dispatch of the tenant, `page` dispatches per statement. Returns the dispatches and rewards changed.
   */
  async eraseRecipient(
    tenantId: string,
    recipient: { email?: string; phone?: string },
    page = 5_000,
  ): Promise<{ dispatches: number; rewards: number }> {
    const email = recipient.email?.toLowerCase() ?? null;
    const phone = recipient.phone?.replace(/[^0-9+]/g, '') ?? null;
    const total = { dispatches: 0, rewards: 0 };
    let cursor: [string, string] = ['infinity', 'ffffffff-ffff-ffff-ffff-ffffffffffff'];
    for (;;) {
      const { rows } = await this.db.main.query<{
        dispatches: number;
        rewards: number;
        seen: number;
        last_at: string | null;
        last_id: string | null;
      }>(DISPATCH_SQL.eraseRecipient, [tenantId, email, phone, cursor[0], cursor[1], page]);
      const r = rows[0];
      total.dispatches += r.dispatches;
      total.rewards += r.rewards;
      if (r.seen < page || !r.last_at || !r.last_id) return total;
      cursor = [r.last_at, r.last_id];
    }
  }
}
