import { Injectable, Optional } from '@nestjs/common';
import { MetricsService } from '../metrics/metrics.service';
import type { Pool } from 'pg';
import { Database } from '../database/database';
import { GroupCommit } from '../database/group-commit';
import { VaultCipher } from '../token-vault/vault-cipher';
import type { DispatchConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import {
  type DispatchRow,
  type DispatchStatus,
  type RewardError,
  type RewardRow,
  type RewardStatus,
  REWARD_STATUSES,
} from './dispatch.view';

/**
 * `vault:rotate`: re-encrypts the LINK redemption links with the vault's first key (same plaintexts). Returns how many
 * were rewritten.
 */
export async function reencryptLinks(pool: Pool, vault: VaultCipher): Promise<number> {
  const { rows } = await pool.query<{ dispatch_id: string; position: number; link_enc: string }>(
    `SELECT dispatch_id, position, link_enc FROM dispatch_rewards WHERE link_enc IS NOT NULL`,
  );
  let rewritten = 0;
  for (const r of rows) {
    if (VaultCipher.keyIdOf(r.link_enc) === vault.currentKeyId) continue;
    const aad = `${r.dispatch_id}/${r.position}/link`;
    await pool.query(
      `UPDATE dispatch_rewards SET link_enc = $3 WHERE dispatch_id = $1 AND position = $2 AND link_enc = $4`,
      [r.dispatch_id, r.position, vault.encrypt(vault.decrypt(r.link_enc, aad), aad), r.link_enc],
    );
    rewritten += 1;
  }
  return rewritten;
}

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
}

/** The dispatch's end of an attempt: settled (derived status) or queued for a retry. */
export interface DispatchUpdate {
  status: DispatchStatus;
  responseStatus: number;
  lastError: Record<string, unknown> | null;
  nextAttemptAt: Date | null;
  sentAt: Date | null;
  /** The attempt made progress: the give-up count starts again (a long batch is not failed for old hiccups). */
  resetAttempts?: boolean;
}

/** One write as the statements take it (exported for the tests that run both forms). */
export function writeItemOf(
  dispatchId: string,
  rewards: RewardUpdate[],
  dispatch: DispatchUpdate | null,
): WriteItem {
  return {
    dispatch_id: dispatchId,
    rewards,
    status: dispatch?.status ?? null,
    response_status: dispatch?.responseStatus ?? null,
    last_error: dispatch?.lastError ?? null,
    next_attempt_at: dispatch?.nextAttemptAt ?? null,
    sent_at: dispatch?.sentAt ?? null,
    reset_attempts: dispatch?.resetAttempts ?? false,
  };
}

export interface WriteItem {
  dispatch_id: string;
  rewards: RewardUpdate[];
  status: DispatchStatus | null;
  response_status: number | null;
  last_error: Record<string, unknown> | null;
  next_attempt_at: Date | null;
  sent_at: Date | null;
  reset_attempts: boolean;
}

export interface WriteResult {
  /** Positions of the dispatch this statement changed (rewards still open). */
  changed: Set<number>;
  /**
   * Read back only by a write that continues an attempt (no dispatch update), which is what a sender checks before
   * its next call: the connection's status as of the statement (null: the dispatch has no connection any more), and
   * whether a cancel was requested. A write that ends the attempt reads neither (null, false).
   */
  connectionStatus: string | null;
  cancelRequested: boolean;
}

/** A batch of more rewards than this is inserted alone rather than in a shared (group) commit. */
const GROUP_COMMIT_MAX_REWARDS = 100;

interface InsertItem {
  id: string;
  tenant_id: string;
  connection_id: string | null;
  environment: string;
  order_shape: string;
  idempotency_key: string;
  request_hash: string;
  request: unknown;
  upstream_payload: unknown;
  queued: boolean;
  priority: number;
  rewards: NewReward[];
}

export interface NewReward {
  position: number;
  external_id: string;
  status: RewardStatus;
  payload: unknown;
  attempts: number;
}

/** Rewards read into memory at once: a worker's slice of a batch, and the most a view lists. */
export const REWARD_PAGE = 100;

/** A sent reward whose delivery the service reports (a LINK is handed over: there is nothing to follow). */
const TRACKED = `t.delivery_method IS DISTINCT FROM 'LINK'`;

/** The status of a dispatch whose rewards are all settled, from counts `c` — the same rule as deriveStatus(). */
const DERIVED_STATUS = `CASE WHEN c.out = 0 AND c.cancelled > 0 THEN 'cancelled' WHEN c.out = 0 THEN 'failed'
  WHEN c.out < c.total THEN 'partially_failed' WHEN c.held > 0 THEN 'pending_approval' ELSE 'sent' END`;

/**
 * The insert of dispatches and their rewards (see insertAll): `$1` the lease in ms; `dispatches` yields the rows to
 * insert (`i`), `rewards` the FROM clause of each inserted dispatch's rewards (`x`).
 */
const insertStatement = (dispatches: string, rewards: string) => `WITH i AS (${dispatches}
  ), d AS (
    INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, order_shape, idempotency_key, request_hash, request,
                                   upstream_payload, status, attempts, lease_until, next_attempt_at, response_status,
                                   reward_count, priority, created_at, updated_at)
    SELECT i.id, i.tenant_id, i.connection_id, i.environment, i.order_shape, i.idempotency_key, i.request_hash, i.request,
           i.upstream_payload, CASE WHEN i.queued THEN 'queued' ELSE 'sending' END, CASE WHEN i.queued THEN 0 ELSE 1 END,
           CASE WHEN i.queued THEN NULL ELSE now() + make_interval(secs => $1::float8 / 1000) END,
           CASE WHEN i.queued THEN now() END, CASE WHEN i.queued THEN 202 END, i.reward_count, i.priority, now(), now()
      FROM i
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING id, created_at, lease_until
  ), r AS (
    INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload, attempts, delivery_method)
    SELECT d.id, x.position, x.external_id, x.status, x.payload, x.attempts, x.payload->'delivery'->>'method'
      ${rewards}
  )
  SELECT id, (extract(epoch FROM created_at) * 1000)::float8 AS created_ms, (extract(epoch FROM lease_until) * 1000)::float8 AS lease_ms
    FROM d`;

/** Any number of dispatches and rewards, as one JSON array ($2). */
const INSERT_MANY = insertStatement(
  `SELECT x.*, jsonb_array_length(x.rewards) AS reward_count
     FROM jsonb_to_recordset($2::jsonb) AS x(id uuid, tenant_id text, connection_id uuid, environment text, order_shape text,
          idempotency_key text, request_hash text, request jsonb, upstream_payload jsonb, queued boolean, priority int, rewards jsonb)`,
  `FROM d JOIN i ON i.id = d.id,
        jsonb_to_recordset(i.rewards) AS x(position int, external_id text, status text, payload jsonb, attempts int)`,
);

/** One dispatch of one reward, as parameters $2–$17. */
const INSERT_ONE = insertStatement(
  `SELECT $2::uuid AS id, $3::text AS tenant_id, $4::uuid AS connection_id, $5::text AS environment, $6::text AS order_shape,
          $7::text AS idempotency_key, $8::text AS request_hash, $9::jsonb AS request, $10::jsonb AS upstream_payload,
          $11::boolean AS queued, $12::int AS priority, 1 AS reward_count`,
  `FROM d, (SELECT $13::int AS position, $14::text AS external_id, $15::text AS status, $16::jsonb AS payload,
                   $17::int AS attempts) AS x`,
);

/**
 * The write of reward outcomes and dispatch progress (see writeAll): `$1` the lease in ms, `$2` the delivery
 * reconciliation delay in ms, `$3` the dispatch key(s) (`target`); `items` yields one row per write (`w`: n,
 * dispatch_id, status, response_status, last_error, next_attempt_at, sent_at, reset_attempts), `rewards` one row per
 * reward update (`u`).
 */
const writeStatement = (items: string, rewards: string, target: string) => `WITH w AS (${items}
  ), u AS (${rewards}
  ), r AS (
    UPDATE dispatch_rewards t
       SET status = x.status, attempts = t.attempts + coalesce(x.bump, 0),
           upstream_order_id = coalesce(x.upstream_order_id, t.upstream_order_id),
           upstream_reward_id = coalesce(x.upstream_reward_id, t.upstream_reward_id),
           upstream_order_status = coalesce(x.upstream_order_status, t.upstream_order_status),
           delivery_status = coalesce(x.delivery_status, t.delivery_status),
           link_enc = coalesce(x.link_enc, t.link_enc),
           last_error = x.last_error, sent_at = coalesce(x.sent_at, t.sent_at), next_check_at = x.next_check_at, updated_at = now(),
           delivery_state = CASE WHEN x.status = 'sent' AND ${TRACKED} THEN coalesce(t.delivery_state, 'pending') ELSE t.delivery_state END,
           delivery_check_at = CASE WHEN x.status = 'sent' AND ${TRACKED} AND t.delivery_state IS NULL
                                    THEN now() + make_interval(secs => $2::float8 / 1000) ELSE t.delivery_check_at END
      FROM u AS x
     WHERE t.dispatch_id ${target} AND t.dispatch_id = x.dispatch_id AND t.position = x.position AND t.status IN ('pending', 'sending')
    RETURNING t.dispatch_id, t.position
  ), d AS (
    UPDATE reward_dispatches dd
       SET status = coalesce(w.status, dd.status), response_status = coalesce(dd.response_status, w.response_status),
           last_error = CASE WHEN w.status IS NULL THEN dd.last_error ELSE w.last_error END,
           next_attempt_at = CASE WHEN w.status IS NULL THEN dd.next_attempt_at ELSE w.next_attempt_at END,
           sent_at = coalesce(dd.sent_at, w.sent_at),
           lease_until = CASE WHEN w.status IS NULL THEN now() + make_interval(secs => $1::float8 / 1000) END,
           attempts = CASE WHEN w.reset_attempts THEN 0 ELSE dd.attempts END, updated_at = now()
      FROM (SELECT DISTINCT ON (dispatch_id) * FROM w ORDER BY dispatch_id, status NULLS LAST) w
     WHERE dd.id ${target} AND dd.id = w.dispatch_id AND dd.status IN ('sending', 'queued')
  )
  SELECT w.dispatch_id,
         (SELECT array_agg(r.position) FROM r WHERE r.dispatch_id = w.dispatch_id) AS changed,
         CASE WHEN w.status IS NULL THEN
           (SELECT c.status FROM reward_dispatches x JOIN connections c ON c.id = x.connection_id WHERE x.id = w.dispatch_id)
         END AS connection_status,
         CASE WHEN w.status IS NULL THEN
           (SELECT x.cancel_requested_at IS NOT NULL FROM reward_dispatches x WHERE x.id = w.dispatch_id)
         END AS cancel_requested
    FROM w ORDER BY w.n`;

/** Writes of any dispatches and rewards, as one JSON array ($4). */
const writeOfJson = (target: string) =>
  writeStatement(
    `SELECT row_number() OVER () AS n, * FROM jsonb_to_recordset($4::jsonb) AS x(dispatch_id uuid, rewards jsonb, status text,
            response_status int, last_error jsonb, next_attempt_at timestamptz, sent_at timestamptz, reset_attempts boolean)`,
    `SELECT w.dispatch_id, y.* FROM w, jsonb_to_recordset(w.rewards) AS y(position int, status text, bump int, upstream_order_id text,
            upstream_reward_id text, upstream_order_status text, delivery_status text, link_enc text, last_error jsonb,
            sent_at timestamptz, next_check_at timestamptz)`,
    target,
  );
/** Several dispatches. */
const WRITE_MANY = writeOfJson('= ANY($3::uuid[])');
/** Writes of one dispatch (lanes of one attempt), `= $3`: a plan Postgres keeps, the same for every value. */
const WRITE_SAME = writeOfJson('= $3::uuid');
/** One write of one dispatch with at most one reward update, as parameters $4–$20. */
const WRITE_ONE = writeStatement(
  `SELECT 1 AS n, $3::uuid AS dispatch_id, $4::text AS status, $5::int AS response_status, $6::jsonb AS last_error,
          $7::timestamptz AS next_attempt_at, $8::timestamptz AS sent_at, $9::boolean AS reset_attempts`,
  `SELECT $3::uuid AS dispatch_id, $10::int AS position, $11::text AS status, $12::int AS bump, $13::text AS upstream_order_id,
          $14::text AS upstream_reward_id, $15::text AS upstream_order_status, $16::text AS delivery_status, $17::text AS link_enc,
          $18::jsonb AS last_error, $19::timestamptz AS sent_at, $20::timestamptz AS next_check_at`,
  '= $3::uuid',
);

/** A time as a parameter: ISO 8601 (cheaper than pg's own Date formatting). */
const iso = (value: Date | null | undefined) => (value ? value.toISOString() : null);

/** A JSON value as a parameter (null stays SQL NULL). */
const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value));

const REWARD_COLUMNS = `dispatch_id, position, external_id, status, upstream_payload, attempts, upstream_order_id, upstream_reward_id,
  upstream_order_status, delivery_method, delivery_status, delivery_state, delivery_reason, link_enc, last_error, sent_at`;

/**
 * Every statement that reads or writes `reward_dispatches` and `dispatch_rewards`. The insert before the first upstream
 * call is synchronous (it is the record that the request was accepted). Writes whose loss is harmless use asynchronous
 * commit (no WAL flush wait): lost, a reward falls back to `sending`, its lease expires and it is re-sent with the same
 * external_id, which the rewards service answers with the original order. A write that fails a reward is always
 * synchronous: re-sent, a refused order might go through (funds added since) after the caller was told it failed.
 */
@Injectable()
export class DispatchStore {
  /** Interactive inserts of concurrent requests share one statement and one commit (see GroupCommit). */
  /** Reward outcomes and dispatch progress, grouped per pool: asynchronous commit, or durable for failures. */
  private readonly relaxedWrites = new GroupCommit<WriteItem, WriteResult>((items) =>
    this.writeAll(this.db.relaxed, false, items),
  );
  private readonly durableWrites = new GroupCommit<WriteItem, WriteResult>((items) =>
    this.writeAll(this.db.main, true, items),
  );
  private readonly inserts = new GroupCommit<
    InsertItem,
    { created_at: Date; lease_until: Date | null } | null
  >((items) => this.insertAll(items));

  constructor(
    @InjectConfig('dispatch') private readonly config: DispatchConfig,
    private readonly db: Database,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  /**
   * The dispatch and its rewards in one statement (one round-trip), keyed by tenant + Idempotency-Key. Returns null
   * when the key is taken (nothing written).
   */
  async insert(
    row: Omit<DispatchRow, 'created_at' | 'updated_at' | 'lease_until' | 'cancel_requested_at'>,
    rewards: NewReward[],
    queued = false,
  ): Promise<{ created_at: Date; lease_until: Date | null } | null> {
    const item: InsertItem = {
      id: row.id,
      tenant_id: row.tenant_id,
      connection_id: row.connection_id,
      environment: row.environment,
      order_shape: row.order_shape,
      idempotency_key: row.idempotency_key,
      request_hash: row.request_hash,
      request: row.request,
      upstream_payload: row.upstream_payload,
      queued,
      priority: row.priority,
      rewards,
    };
    // Interactive sends share commits (group commit); a batch's large insert goes alone, so it never holds them up.
    const [stamp] =
      rewards.length <= GROUP_COMMIT_MAX_REWARDS
        ? [await this.inserts.submit(item)]
        : await this.insertAll([item]);
    return stamp;
  }

  /**
   * Inserts dispatches and their rewards in one statement (one round-trip, one commit), keyed by tenant +
   * Idempotency-Key: a key already taken (or taken twice in the same batch) inserts nothing for that item (null).
   * `queued` (a batch, or `Prefer: respond-async`): stored due now, with its 202 as the answer, for the workers; else
   * stored `sending`, held by the request for its lease.
   */
  private async insertAll(
    items: InsertItem[],
  ): Promise<({ created_at: Date; lease_until: Date | null } | null)[]> {
    // One dispatch of one reward (every interactive send when nothing queues): its values as parameters, read by the
    // same statement — cheaper than a JSON array taken apart.
    const one = items.length === 1 && items[0].rewards.length === 1;
    const values: unknown[] = [this.config.leaseMs];
    if (one) {
      const [i] = items;
      const [r] = i.rewards;
      values.push(i.id, i.tenant_id, i.connection_id, i.environment, i.order_shape, i.idempotency_key);
      values.push(i.request_hash, JSON.stringify(i.request), JSON.stringify(i.upstream_payload), i.queued);
      values.push(i.priority, r.position, r.external_id, r.status, JSON.stringify(r.payload), r.attempts);
    } else values.push(JSON.stringify(items));
    // Times come back as epoch milliseconds (a float8 is parsed as a number, cheaper than pg's timestamp parsing).
    const { rows } = await this.db.main.query<{
      id: string;
      created_ms: number;
      lease_ms: number | null;
    }>({
      name: one ? 'rg_dispatch_insert_one_v6' : 'rg_dispatch_insert_v6',
      text: one ? INSERT_ONE : INSERT_MANY,
      values,
    });
    this.metrics?.insertBatch.observe(items.length);
    const byId = new Map(rows.map((r) => [r.id, r]));
    return items.map((item) => {
      const r = byId.get(item.id);
      return r
        ? {
            created_at: new Date(r.created_ms),
            lease_until: r.lease_ms === null ? null : new Date(r.lease_ms),
          }
        : null;
    });
  }

  /**
   * Reward changes and the dispatch's progress in one statement. Without `dispatch`, the dispatch's lease is extended
   * (work is going on); with it, the dispatch ends this attempt (settled or queued). Returns how many rewards changed
   * and the connection's status as of this statement (null: the dispatch has no connection any more), so a sender
   * learns of a disconnect on any instance before its next call, at no extra round-trip.
   */
  async write(
    dispatchId: string,
    rewards: RewardUpdate[],
    dispatch: DispatchUpdate | null,
  ): Promise<WriteResult> {
    const durable =
      rewards.some((r) => r.status === 'failed' || r.status === 'cancelled') ||
      dispatch?.status === 'failed' ||
      dispatch?.status === 'cancelled';
    return (durable ? this.durableWrites : this.relaxedWrites).submit(
      writeItemOf(dispatchId, rewards, dispatch),
    );
  }

  /**
   * The writes of several dispatches in one statement (group commit, see `write`): per dispatch, its reward updates
   * (only rewards still `pending` / `sending` change) and its progress — with `status` the end of its attempt, without
   * it a lease extension. Two writes of one dispatch may share a statement only as lease extensions (lanes of one
   * attempt; their reward updates touch different positions), which is how the sender uses it.
   */
  private async writeAll(pool: Pool, durable: boolean, items: WriteItem[]): Promise<WriteResult[]> {
    const ids = [...new Set(items.map((i) => i.dispatch_id))];
    // The dispatches again as keys ($3), so that every plan reaches them by primary key. Joined to the items alone, whose
    // 100-row estimate (jsonb_to_recordset) is all a plan knows, a plan made while the tables were small hash-joins a
    // scan of them and keeps doing so, which grows with the tables.
    const values: unknown[] = [this.config.leaseMs, this.config.deliveryReconcileAfterMs];
    // One dispatch with at most one reward (every interactive send's last write when nothing queues): its values as
    // parameters, `= $3` (a plan Postgres keeps, the same for every value): cheaper than the same write as a JSON
    // array taken apart.
    const one = items.length === 1 && items[0].rewards.length <= 1;
    if (one) {
      const [w] = items;
      const r: Partial<RewardUpdate> = w.rewards[0] ?? {};
      values.push(w.dispatch_id, w.status, w.response_status, json(w.last_error), iso(w.next_attempt_at));
      values.push(iso(w.sent_at), w.reset_attempts, r.position ?? null, r.status ?? null, r.bump ?? 0);
      values.push(r.upstream_order_id ?? null, r.upstream_reward_id ?? null, r.upstream_order_status ?? null);
      values.push(r.delivery_status ?? null, r.link_enc ?? null, json(r.last_error), iso(r.sent_at));
      values.push(iso(r.next_check_at));
    } else values.push(ids.length === 1 ? ids[0] : ids, JSON.stringify(items));
    const { rows } = await pool.query<{
      dispatch_id: string;
      changed: number[] | null;
      connection_status: string | null;
      cancel_requested: boolean | null;
    }>({
      name: `rg_dispatch_write${durable ? '_sync' : ''}${one ? '_one' : ids.length === 1 ? '_same' : ''}_v9`,
      text: one ? WRITE_ONE : ids.length === 1 ? WRITE_SAME : WRITE_MANY,
      values,
    });
    // Positions changed belong to their dispatch; two items of one dispatch each see every position changed for it,
    // and each only looks at its own.
    return rows.map((row) => ({
      changed: new Set(row.changed ?? []),
      connectionStatus: row.connection_status,
      cancelRequested: row.cancel_requested ?? false,
    }));
  }

  /**
   * Ends a worker's attempt whose rewards are all settled (they may be more than it held in memory): derives the
   * dispatch's status from the stored rewards. With `giveUp`, every reward still open fails first with that reason.
   * A dispatch that still has open rewards (none should) is queued again, due now.
   */
  async settle(dispatchId: string, giveUp: RewardError | null = null): Promise<void> {
    const pool = this.db.main;
    if (giveUp) {
      await pool.query(
        `UPDATE dispatch_rewards SET status = 'failed', updated_at = now(),
                last_error = $2::jsonb || jsonb_build_object('outcome_unknown', status = 'sending')
          WHERE dispatch_id = $1 AND status IN ('pending', 'sending')`,
        [dispatchId, JSON.stringify(giveUp)],
      );
    }
    await pool.query({
      name: 'rg_dispatch_settle',
      text: `WITH c AS (
               SELECT count(*) AS total,
                      count(*) FILTER (WHERE status IN ('sent', 'pending_approval')) AS out,
                      count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
                      count(*) FILTER (WHERE status = 'pending_approval') AS held,
                      count(*) FILTER (WHERE status IN ('pending', 'sending')) AS open,
                      count(DISTINCT last_error->>'code') FILTER (WHERE status IN ('failed', 'cancelled')) AS codes,
                      min(last_error->>'code') FILTER (WHERE status IN ('failed', 'cancelled')) AS code,
                      bool_and(last_error->>'code' IN ('upstream_unavailable', 'upstream_rate_limited'))
                        FILTER (WHERE status IN ('failed', 'cancelled')) AS gave_up,
                      max(sent_at) AS sent_at
                 FROM dispatch_rewards WHERE dispatch_id = $1
             ), s AS (
               SELECT c.*, CASE WHEN c.open > 0 THEN 'queued' ELSE ${DERIVED_STATUS} END AS status,
                      CASE WHEN c.codes = 1 THEN c.code ELSE 'upstream_rejected' END AS common_code
                 FROM c
             )
             UPDATE reward_dispatches d
                SET status = s.status, lease_until = NULL, updated_at = now(),
                    next_attempt_at = CASE WHEN s.status = 'queued' THEN now() END,
                    sent_at = coalesce(d.sent_at, s.sent_at),
                    response_status = coalesce(d.response_status, CASE
                      WHEN s.status IN ('sent', 'partially_failed') THEN 201
                      WHEN s.status IN ('pending_approval', 'queued') THEN 202
                      WHEN s.status = 'cancelled' OR s.common_code IN ('connection_not_active', 'dispatch_cancelled') THEN 409
                      WHEN s.gave_up THEN 503 ELSE 422 END),
                    last_error = CASE WHEN s.status IN ('failed', 'cancelled')
                      THEN jsonb_build_object('code', s.common_code, 'message',
                             CASE WHEN s.total = 1 THEN 'The reward was not sent; see the reward.'
                                  ELSE 'None of the ' || s.total || ' rewards was sent; see each reward.' END)
                      ELSE NULL END
               FROM s
              WHERE d.id = $1 AND d.status IN ('sending', 'queued')`,
      values: [dispatchId],
    });
  }

  /**
   * `POST …/dispatches/{id}/cancel`: every reward not sent yet (`pending`) ends `cancelled` at once; a reward already
   * on its way (`sending`) finishes. A dispatch no worker holds is settled here; one being sent is settled by its
   * sender, which sees the request at its next write and stops. Returns false when the dispatch was already settled.
   */
  async cancel(tenantId: string, dispatchId: string): Promise<boolean> {
    const { rows } = await this.db.main.query<{ id: string }>(
      `WITH d AS (
         UPDATE reward_dispatches SET cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
          WHERE tenant_id = $1 AND id = $2 AND status IN ('queued', 'sending')
          RETURNING id
       ), r AS (
         UPDATE dispatch_rewards t SET status = 'cancelled', updated_at = now(),
                last_error = '{"code": "dispatch_cancelled", "message": "The dispatch was cancelled before this reward was sent; it was not sent."}'
           FROM d WHERE t.dispatch_id = d.id AND t.status = 'pending'
       )
       SELECT id FROM d`,
      [tenantId, dispatchId],
    );
    if (!rows.length) return false;
    // Not held by a live sender (queued, or its holder died): settle now if nothing is on its way.
    const { rows: idle } = await this.db.main.query<{ open: number }>(
      `SELECT count(*) FILTER (WHERE r.status IN ('pending', 'sending'))::int AS open
         FROM reward_dispatches d JOIN dispatch_rewards r ON r.dispatch_id = d.id
        WHERE d.id = $1 AND (d.status = 'queued' OR d.lease_until < now())`,
      [dispatchId],
    );
    if (idle[0] && idle[0].open === 0) await this.settle(dispatchId);
    return true;
  }

  /** Up to `limit` rewards of a dispatch not settled yet, after `afterPosition`, in position order: one slice. */
  async openRewards(dispatchId: string, afterPosition: number, limit = REWARD_PAGE): Promise<RewardRow[]> {
    return (
      await this.db.main.query<RewardRow>(
        `SELECT ${REWARD_COLUMNS} FROM dispatch_rewards
        WHERE dispatch_id = $1 AND position > $2 AND status IN ('pending', 'sending') ORDER BY position LIMIT $3`,
        [dispatchId, afterPosition, limit],
      )
    ).rows;
  }

  /** Counts per reward status of the given dispatches (stored counts, whatever their size). */
  async countsOf(dispatchIds: string[]): Promise<Map<string, Record<RewardStatus, number>>> {
    const { rows } = await this.db.main.query<{ dispatch_id: string; status: RewardStatus; n: number }>(
      `SELECT dispatch_id, status, count(*)::int AS n FROM dispatch_rewards WHERE dispatch_id = ANY($1::uuid[])
        GROUP BY dispatch_id, status`,
      [dispatchIds],
    );
    const counts = new Map<string, Record<RewardStatus, number>>(
      dispatchIds.map((id) => [
        id,
        Object.fromEntries(REWARD_STATUSES.map((st) => [st, 0])) as Record<RewardStatus, number>,
      ]),
    );
    for (const r of rows) {
      const c = counts.get(r.dispatch_id);
      if (c) c[r.status] = r.n;
    }
    return counts;
  }

  /**
   * Forgets a dispatch nothing of which reached the rewards service (its first call could not get a token): the caller
   * may retry the same Idempotency-Key later. Only while this process still holds it.
   */
  async discard(dispatchId: string): Promise<void> {
    await this.db.main.query(
      `DELETE FROM reward_dispatches WHERE id = $1 AND status = 'sending' AND attempts = 1`,
      [dispatchId],
    );
  }

  async findByKey(tenantId: string, key: string): Promise<DispatchRow | null> {
    const { rows } = await this.db.main.query<DispatchRow>(
      `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND idempotency_key = $2`,
      [tenantId, key],
    );
    return rows[0] ?? null;
  }

  async find(tenantId: string, id: string): Promise<DispatchRow | null> {
    const { rows } = await this.db.main.query<DispatchRow>(
      `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND id = $2`,
      [tenantId, id],
    );
    return rows[0] ?? null;
  }

  async list(
    tenantId: string,
    status: string | undefined,
    limit: number,
    offset: number,
  ): Promise<DispatchRow[]> {
    return (
      await this.db.main.query<DispatchRow>(
        `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)
        ORDER BY created_at DESC, id LIMIT $3 OFFSET $4`,
        [tenantId, status ?? null, limit, offset],
      )
    ).rows;
  }

  /** The rewards of the given dispatches, by dispatch, in position order: at most `limit` each from `offset`. */
  async rewardsOf(dispatchIds: string[], limit = REWARD_PAGE, offset = 0): Promise<Map<string, RewardRow[]>> {
    const { rows } = await this.db.main.query<RewardRow>(
      `SELECT r.* FROM unnest($1::uuid[]) AS d(id),
              LATERAL (SELECT ${REWARD_COLUMNS} FROM dispatch_rewards
                        WHERE dispatch_id = d.id AND position >= $3 ORDER BY position LIMIT $2) r`,
      [dispatchIds, limit, offset],
    );
    const byDispatch = new Map<string, RewardRow[]>(dispatchIds.map((id) => [id, []]));
    for (const r of rows) byDispatch.get(r.dispatch_id)?.push(r);
    return byDispatch;
  }

  /**
   * The worker's claim: due retries, due batch slices, and dispatches whose holder died (lease expired), one instance
   * each. Fair: round-robin over accounts — at most one dispatch per connection per claim, accounts whose oldest due
   * work is oldest first, interactive before bulk — and never a connection this instance is already busy with at
   * that priority (`busyInteractive`, `busyBulk`). The connection's status is read in the same statement: a dispatch
   * whose connection was disconnected is not claimed but ends here — its unsent rewards `cancelled`, the dispatch
   * `cancelled` (or `partially_failed` when some of it went out before).
   */
  async claimDue(
    limit: number,
    busyInteractive: string[] = [],
    busyBulk: string[] = [],
  ): Promise<DispatchRow[]> {
    const { rows } = await this.db.main.query<DispatchRow>({
      name: 'rg_dispatch_claim_v2',
      text: `WITH ready AS (
         SELECT d.id, d.priority, coalesce(d.next_attempt_at, d.lease_until) AS due,
                row_number() OVER (PARTITION BY d.connection_id ORDER BY d.priority, coalesce(d.next_attempt_at, d.lease_until)) AS turn
           FROM reward_dispatches d
          WHERE ((d.status = 'queued' AND d.next_attempt_at <= now()) OR (d.status = 'sending' AND d.lease_until < now()))
            AND NOT (d.priority = 0 AND d.connection_id = ANY($3::uuid[]))
            AND NOT (d.priority = 1 AND d.connection_id = ANY($4::uuid[]))
       ), candidates AS (
         SELECT id FROM ready WHERE turn = 1 ORDER BY priority, due LIMIT $2
       ), due AS (
         SELECT d.id, (c.id IS NULL OR c.status = 'disconnected') AS gone
           FROM reward_dispatches d LEFT JOIN connections c ON c.id = d.connection_id
          WHERE d.id IN (SELECT id FROM candidates)
            AND ((d.status = 'queued' AND d.next_attempt_at <= now()) OR (d.status = 'sending' AND d.lease_until < now()))
          FOR UPDATE OF d SKIP LOCKED
       ), cancelled_rewards AS (
         UPDATE dispatch_rewards r SET status = 'cancelled', updated_at = now(),
                last_error = '{"code": "dispatch_cancelled", "message": "The rewards connection was disconnected before this reward was sent; it was not sent."}'
           FROM due WHERE due.gone AND r.dispatch_id = due.id AND r.status IN ('pending', 'sending')
       ), cancelled AS (
         UPDATE reward_dispatches d
            SET status = CASE WHEN EXISTS (SELECT 1 FROM dispatch_rewards r WHERE r.dispatch_id = d.id AND r.status IN ('sent', 'pending_approval'))
                              THEN 'partially_failed' ELSE 'cancelled' END,
                response_status = coalesce(d.response_status, 409), lease_until = NULL, next_attempt_at = NULL, updated_at = now(),
                last_error = '{"code": "dispatch_cancelled", "message": "The rewards connection was disconnected; what was not sent was cancelled."}'
           FROM due WHERE due.gone AND d.id = due.id
       )
       UPDATE reward_dispatches d
          SET status = 'sending', attempts = d.attempts + 1, updated_at = now(),
              lease_until = now() + make_interval(secs => $1::float8 / 1000)
         FROM due
        WHERE d.id = due.id AND NOT due.gone
        RETURNING d.*`,
      values: [this.config.leaseMs, limit, busyInteractive, busyBulk],
    });
    return rows;
  }

  /**
   * A delivery outcome for the reward the service knows as `upstreamRewardId` (from a webhook or reconciliation),
   * idempotent and order-proof: applied only when it is not older than the state recorded (`eventAt`), and a final
   * state is never replaced by `pending`. `accountConnectionIds`: the connections the event can belong to (an event of
   * another account changes nothing). Returns the reward changed, or null when nothing changed.
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
    const { rows } = await this.db.main.query<{
      dispatch_id: string;
      position: number;
      tenant_id: string;
    }>({
      name: 'rg_dispatch_record_delivery',
      text: `UPDATE dispatch_rewards r
                SET delivery_state = $3, delivery_status = $4, delivery_reason = $5, delivery_event_at = $6,
                    delivery_check_at = CASE WHEN $3 = 'pending' THEN r.delivery_check_at END, updated_at = now()
               FROM reward_dispatches d
              WHERE r.upstream_reward_id = $1 AND d.id = r.dispatch_id AND d.connection_id = ANY($2::uuid[])
                AND r.status IN ('sent', 'pending_approval')
                AND (r.delivery_event_at IS NULL OR r.delivery_event_at < $6
                     OR (r.delivery_event_at = $6 AND r.delivery_state = 'pending'))
                AND NOT ($3 = 'pending' AND r.delivery_state IN ('delivered', 'delivery_failed'))
                AND (r.delivery_state IS DISTINCT FROM $3 OR r.delivery_status IS DISTINCT FROM $4)
              RETURNING r.dispatch_id, r.position, d.tenant_id`,
      values: [
        upstreamRewardId,
        accountConnectionIds,
        outcome.state,
        outcome.status,
        outcome.reason,
        outcome.eventAt,
      ],
    });
    return rows[0] ?? null;
  }

  /**
   * Reconciliation: claims up to `limit` sent rewards whose delivery is not final and whose check is due (SKIP
   * LOCKED: one instance each), pushing their next check out by `nextCheckMs`. Rewards enter this schedule when sent
   * (`delivery_check_at` = sent + the configured delay) — see `scheduleDeliveryChecks`.
   */
  async claimDeliveryChecks(
    limit: number,
    nextCheckMs: number,
  ): Promise<{ dispatch_id: string; position: number; upstream_reward_id: string; connection_id: string }[]> {
    const { rows } = await this.db.main.query<{
      dispatch_id: string;
      position: number;
      upstream_reward_id: string;
      connection_id: string;
    }>(
      `UPDATE dispatch_rewards r SET delivery_check_at = now() + make_interval(secs => $2::float8 / 1000)
         FROM (SELECT dispatch_id, position FROM dispatch_rewards
                WHERE delivery_check_at <= now() ORDER BY delivery_check_at LIMIT $1 FOR UPDATE SKIP LOCKED) due,
              reward_dispatches d
        WHERE r.dispatch_id = due.dispatch_id AND r.position = due.position AND d.id = r.dispatch_id
          AND r.upstream_reward_id IS NOT NULL AND d.connection_id IS NOT NULL
        RETURNING r.dispatch_id, r.position, r.upstream_reward_id, d.connection_id`,
      [limit, nextCheckMs],
    );
    return rows;
  }

  /** Stops polling a reward (its connection is gone, or the service does not know it). */
  async stopDeliveryCheck(dispatchId: string, position: number): Promise<void> {
    await this.db.main.query(
      `UPDATE dispatch_rewards SET delivery_check_at = NULL WHERE dispatch_id = $1 AND position = $2`,
      [dispatchId, position],
    );
  }

  /**
   * Claims one reward held for approval whose check is due (SKIP LOCKED: one instance each). The claim pushes its next
   * check out by the lease, so a crashed checker's row comes back later on its own.
   */
  async claimApprovalCheck(): Promise<(RewardRow & { connection_id: string | null }) | null> {
    const { rows } = await this.db.main.query<RewardRow & { connection_id: string | null }>(
      `UPDATE dispatch_rewards r SET next_check_at = now() + make_interval(secs => $1::float8 / 1000)
         FROM (SELECT dispatch_id, position FROM dispatch_rewards
                WHERE status = 'pending_approval' AND next_check_at <= now()
                ORDER BY next_check_at LIMIT 1 FOR UPDATE SKIP LOCKED) due, reward_dispatches d
        WHERE r.dispatch_id = due.dispatch_id AND r.position = due.position AND d.id = r.dispatch_id
        RETURNING ${REWARD_COLUMNS.split(',')
          .map((c) => `r.${c.trim()}`)
          .join(', ')}, d.connection_id`,
      [this.config.leaseMs],
    );
    return rows[0] ?? null;
  }

  /** Settles (or re-schedules) a reward held for approval and re-derives its dispatch's status, in one transaction. */
  async settleApproval(dispatchId: string, update: RewardUpdate): Promise<void> {
    await this.db.main.query(
      `WITH r AS (
         UPDATE dispatch_rewards t
            SET status = x.status, upstream_order_status = coalesce(x.upstream_order_status, t.upstream_order_status),
                delivery_status = coalesce(x.delivery_status, t.delivery_status), last_error = x.last_error,
                sent_at = coalesce(x.sent_at, t.sent_at), next_check_at = x.next_check_at, updated_at = now(),
                delivery_state = CASE WHEN x.status = 'sent' AND ${TRACKED} THEN coalesce(t.delivery_state, 'pending') ELSE t.delivery_state END,
                delivery_check_at = CASE WHEN x.status = 'sent' AND ${TRACKED} AND t.delivery_state IS NULL
                                         THEN now() + make_interval(secs => $5::float8 / 1000) ELSE t.delivery_check_at END
           FROM jsonb_to_record($2::jsonb) AS x(position int, status text, upstream_order_status text, delivery_status text,
                last_error jsonb, sent_at timestamptz, next_check_at timestamptz)
          WHERE t.dispatch_id = $1 AND t.position = x.position AND t.status = 'pending_approval'
          RETURNING t.dispatch_id
       ), counts AS (
         -- The other rewards as stored, this one as it becomes (a CTE's update is not visible to its siblings).
         SELECT count(*) AS total,
                count(*) FILTER (WHERE CASE WHEN t.position = $3 THEN $4 ELSE t.status END IN ('sent', 'pending_approval')) AS out,
                count(*) FILTER (WHERE CASE WHEN t.position = $3 THEN $4 ELSE t.status END = 'cancelled') AS cancelled,
                count(*) FILTER (WHERE CASE WHEN t.position = $3 THEN $4 ELSE t.status END = 'pending_approval') AS held,
                count(*) FILTER (WHERE CASE WHEN t.position = $3 THEN $4 ELSE t.status END IN ('pending', 'sending')) AS open
           FROM dispatch_rewards t WHERE t.dispatch_id = $1
       )
       UPDATE reward_dispatches d
          SET status = ${DERIVED_STATUS},
              sent_at = CASE WHEN $4 = 'sent' THEN coalesce(d.sent_at, now()) ELSE d.sent_at END, updated_at = now()
         FROM counts c, r
        WHERE d.id = $1 AND c.open = 0 AND d.status IN ('pending_approval', 'partially_failed')`,
      [
        dispatchId,
        JSON.stringify(update),
        update.position,
        update.status,
        this.config.deliveryReconcileAfterMs,
      ],
    );
  }
}
