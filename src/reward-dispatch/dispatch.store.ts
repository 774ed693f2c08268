import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { createPool } from '../database/pg-pools';
import { VaultCipher } from '../token-vault/vault-cipher';
import { mainPool } from '../database/sql';
import type { DataSource } from 'typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import type { DispatchRow, DispatchStatus, RewardError, RewardRow, RewardStatus } from './dispatch.view';

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
}

export interface NewReward {
  position: number;
  external_id: string;
  status: RewardStatus;
  payload: unknown;
  attempts: number;
}

const REWARD_COLUMNS = `dispatch_id, position, external_id, status, upstream_payload, attempts, upstream_order_id, upstream_reward_id,
  upstream_order_status, delivery_method, delivery_status, link_enc, last_error, sent_at`;

/**
 * Every statement that reads or writes `reward_dispatches` and `dispatch_rewards`. The insert before the first upstream
 * call is synchronous (it is the record that the request was accepted). Writes whose loss is harmless use asynchronous
 * commit (no WAL flush wait): lost, a reward falls back to `sending`, its lease expires and it is re-sent with the same
 * external_id, which the rewards service answers with the original order. A write that fails a reward is always
 * synchronous: re-sent, a refused order might go through (funds added since) after the caller was told it failed.
 */
@Injectable()
export class DispatchStore implements OnModuleDestroy {
  private readonly logger = new Logger(DispatchStore.name);
  private readonly relaxed: Pool;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
  ) {
    this.relaxed = createPool(
      { url: config.databaseUrl as string, maxConnections: config.databaseMaxConnections },
      'relaxed',
    );
    this.relaxed.on('error', (error) => this.logger.warn(`dispatch pool: ${error.message}`));
  }

  async onModuleDestroy(): Promise<void> {
    await this.relaxed.end();
  }

  /**
   * The dispatch and its rewards in one statement (one round-trip), keyed by tenant + Idempotency-Key. Returns null
   * when the key is taken (nothing written).
   */
  async insert(
    row: Omit<DispatchRow, 'created_at' | 'updated_at' | 'lease_until'>,
    rewards: NewReward[],
  ): Promise<{ created_at: Date; lease_until: Date } | null> {
    const { rows } = await mainPool(this.db).query<{ created_at: Date; lease_until: Date }>({
      name: 'rg_dispatch_insert_v2',
      text: `WITH d AS (
               INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, order_shape, idempotency_key, request_hash, request,
                                              upstream_payload, status, attempts, lease_until, created_at, updated_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'sending', 1, now() + make_interval(secs => $10::float8 / 1000), now(), now())
               ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
               RETURNING id, created_at, lease_until
             ), r AS (
               INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload, attempts, delivery_method)
               SELECT d.id, x.position, x.external_id, x.status, x.payload, x.attempts, x.payload->'delivery'->>'method'
                 FROM d, jsonb_to_recordset($11::jsonb) AS x(position int, external_id text, status text, payload jsonb, attempts int)
             )
             SELECT created_at, lease_until FROM d`,
      values: [
        row.id,
        row.tenant_id,
        row.connection_id,
        row.environment,
        row.order_shape,
        row.idempotency_key,
        row.request_hash,
        row.request,
        row.upstream_payload,
        this.config.dispatch.leaseMs,
        JSON.stringify(rewards),
      ],
    });
    return rows[0] ?? null;
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
  ): Promise<{ changed: number; connectionStatus: string | null }> {
    const durable =
      rewards.some((r) => r.status === 'failed' || r.status === 'cancelled') ||
      dispatch?.status === 'failed' ||
      dispatch?.status === 'cancelled';
    const pool = durable ? mainPool(this.db) : this.relaxed;
    const { rows } = await pool.query<{ changed: number; connection_status: string | null }>({
      name: durable ? 'rg_dispatch_write_sync_v2' : 'rg_dispatch_write_v2',
      text: `WITH r AS (
               UPDATE dispatch_rewards t
                  SET status = x.status, attempts = t.attempts + coalesce(x.bump, 0),
                      upstream_order_id = coalesce(x.upstream_order_id, t.upstream_order_id),
                      upstream_reward_id = coalesce(x.upstream_reward_id, t.upstream_reward_id),
                      upstream_order_status = coalesce(x.upstream_order_status, t.upstream_order_status),
                      delivery_status = coalesce(x.delivery_status, t.delivery_status),
                      link_enc = coalesce(x.link_enc, t.link_enc),
                      last_error = x.last_error, sent_at = coalesce(x.sent_at, t.sent_at), next_check_at = x.next_check_at, updated_at = now()
                 FROM jsonb_to_recordset($2::jsonb) AS x(position int, status text, bump int, upstream_order_id text, upstream_reward_id text,
                      upstream_order_status text, delivery_status text, link_enc text, last_error jsonb, sent_at timestamptz, next_check_at timestamptz)
                WHERE t.dispatch_id = $1 AND t.position = x.position AND t.status IN ('pending', 'sending')
               RETURNING t.position
             ), d AS (
               UPDATE reward_dispatches
                  SET status = coalesce($3, status), response_status = coalesce(response_status, $4), last_error = CASE WHEN $3 IS NULL THEN last_error ELSE $5 END,
                      next_attempt_at = CASE WHEN $3 IS NULL THEN next_attempt_at ELSE $6 END, sent_at = coalesce(sent_at, $7),
                      lease_until = CASE WHEN $3 IS NULL THEN now() + make_interval(secs => $8::float8 / 1000) END, updated_at = now()
                WHERE id = $1 AND status IN ('sending', 'queued')
             )
             SELECT (SELECT count(*)::int FROM r) AS changed,
                    (SELECT c.status FROM reward_dispatches x JOIN connections c ON c.id = x.connection_id WHERE x.id = $1) AS connection_status`,
      values: [
        dispatchId,
        JSON.stringify(rewards),
        dispatch?.status ?? null,
        dispatch?.responseStatus ?? null,
        dispatch?.lastError ?? null,
        dispatch?.nextAttemptAt ?? null,
        dispatch?.sentAt ?? null,
        this.config.dispatch.leaseMs,
      ],
    });
    return { changed: rows[0]?.changed ?? 0, connectionStatus: rows[0]?.connection_status ?? null };
  }

  /**
   * Forgets a dispatch nothing of which reached the rewards service (its first call could not get a token): the caller
   * may retry the same Idempotency-Key later. Only while this process still holds it.
   */
  async discard(dispatchId: string): Promise<void> {
    await mainPool(this.db).query(
      `DELETE FROM reward_dispatches WHERE id = $1 AND status = 'sending' AND attempts = 1`,
      [dispatchId],
    );
  }

  async findByKey(tenantId: string, key: string): Promise<DispatchRow | null> {
    const rows = (await this.db.query(
      `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND idempotency_key = $2`,
      [tenantId, key],
    )) as DispatchRow[];
    return rows[0] ?? null;
  }

  async find(tenantId: string, id: string): Promise<DispatchRow | null> {
    const rows = (await this.db.query(`SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND id = $2`, [
      tenantId,
      id,
    ])) as DispatchRow[];
    return rows[0] ?? null;
  }

  async list(
    tenantId: string,
    status: string | undefined,
    limit: number,
    offset: number,
  ): Promise<DispatchRow[]> {
    return (await this.db.query(
      `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)
        ORDER BY created_at DESC, id LIMIT $3 OFFSET $4`,
      [tenantId, status ?? null, limit, offset],
    )) as DispatchRow[];
  }

  /** The rewards of the given dispatches, by dispatch, in position order. */
  async rewardsOf(dispatchIds: string[]): Promise<Map<string, RewardRow[]>> {
    const rows = (await this.db.query(
      `SELECT ${REWARD_COLUMNS} FROM dispatch_rewards WHERE dispatch_id = ANY($1::uuid[]) ORDER BY dispatch_id, position`,
      [dispatchIds],
    )) as RewardRow[];
    const byDispatch = new Map<string, RewardRow[]>(dispatchIds.map((id) => [id, []]));
    for (const r of rows) byDispatch.get(r.dispatch_id)?.push(r);
    return byDispatch;
  }

  /**
   * The worker's claim: due retries and dispatches whose holder died (lease expired), one instance each. The
   * connection's status is read in the same statement: a dispatch whose connection was disconnected is not claimed
   * but ends here — its unsent rewards `cancelled`, the dispatch `cancelled` (or `partially_failed` when some of it
   * went out before).
   */
  async claimDue(limit: number): Promise<DispatchRow[]> {
    const { rows } = await mainPool(this.db).query<DispatchRow>(
      `WITH due AS (
         SELECT d.id, (c.id IS NULL OR c.status = 'disconnected') AS gone
           FROM reward_dispatches d LEFT JOIN connections c ON c.id = d.connection_id
          WHERE (d.status = 'queued' AND d.next_attempt_at <= now()) OR (d.status = 'sending' AND d.lease_until < now())
          ORDER BY coalesce(d.next_attempt_at, d.lease_until)
          LIMIT $2 FOR UPDATE OF d SKIP LOCKED
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
      [this.config.dispatch.leaseMs, limit],
    );
    return rows;
  }

  /**
   * Claims one reward held for approval whose check is due (SKIP LOCKED: one instance each). The claim pushes its next
   * check out by the lease, so a crashed checker's row comes back later on its own.
   */
  async claimApprovalCheck(): Promise<(RewardRow & { connection_id: string | null }) | null> {
    const [rows] = (await this.db.query(
      `UPDATE dispatch_rewards r SET next_check_at = now() + make_interval(secs => $1::float8 / 1000)
         FROM (SELECT dispatch_id, position FROM dispatch_rewards
                WHERE status = 'pending_approval' AND next_check_at <= now()
                ORDER BY next_check_at LIMIT 1 FOR UPDATE SKIP LOCKED) due, reward_dispatches d
        WHERE r.dispatch_id = due.dispatch_id AND r.position = due.position AND d.id = r.dispatch_id
        RETURNING ${REWARD_COLUMNS.split(',')
          .map((c) => `r.${c.trim()}`)
          .join(', ')}, d.connection_id`,
      [this.config.dispatch.leaseMs],
    )) as [(RewardRow & { connection_id: string | null })[], number];
    return rows[0] ?? null;
  }

  /** Settles (or re-schedules) a reward held for approval and re-derives its dispatch's status, in one transaction. */
  async settleApproval(dispatchId: string, update: RewardUpdate): Promise<void> {
    await this.db.query(
      `WITH r AS (
         UPDATE dispatch_rewards t
            SET status = x.status, upstream_order_status = coalesce(x.upstream_order_status, t.upstream_order_status),
                delivery_status = coalesce(x.delivery_status, t.delivery_status), last_error = x.last_error,
                sent_at = coalesce(x.sent_at, t.sent_at), next_check_at = x.next_check_at, updated_at = now()
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
       -- The same rule as deriveStatus() in dispatch.view.ts.
       UPDATE reward_dispatches d
          SET status = CASE WHEN c.out = 0 AND c.cancelled > 0 THEN 'cancelled' WHEN c.out = 0 THEN 'failed'
                            WHEN c.out < c.total THEN 'partially_failed' WHEN c.held > 0 THEN 'pending_approval' ELSE 'sent' END,
              sent_at = CASE WHEN $4 = 'sent' THEN coalesce(d.sent_at, now()) ELSE d.sent_at END, updated_at = now()
         FROM counts c, r
        WHERE d.id = $1 AND c.open = 0 AND d.status IN ('pending_approval', 'partially_failed')`,
      [dispatchId, JSON.stringify(update), update.position, update.status],
    );
  }
}
