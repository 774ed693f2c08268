import { HttpStatus, Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { Pool } from 'pg';
import { MetricsService } from '../ops/metrics.service';
import { InjectDataSource } from '@nestjs/typeorm';
import { createHash, randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import { AppError, type ErrorDetail } from '../common/app-error';
import { canonicalJson } from '../common/canonical-json';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig, RewardsEnvironmentConfig } from '../config/app-config';
import { ConnectionsService } from '../connections/connections.service';
import { customFieldsError, resolveCustomFields, type ResolvedCustomField } from '../fields-cache/custom-fields';
import { FieldsCacheService } from '../fields-cache/fields-cache.service';
import { RewardsApiClient } from '../rewards-api/rewards-api.client';
import { RewardsApiError } from '../rewards-api/rewards-api.errors';
import { TenantsService } from '../tenants/tenants.service';
import { AccessTokenProvider } from '../token-vault/access-token.provider';
import { ConnectionNotActiveError } from '../token-vault/token-vault.errors';
import type { SendRewardsDto } from './dto/send-rewards.dto';
import { type DispatchRow, type UpstreamOrder, toView } from './dispatch.view';

export interface HttpOutcome {
  status: number;
  body: unknown;
  replayed?: boolean;
  headers?: Record<string, string>;
}

const MAX_BACKOFF_MS = 5 * 60_000;

/**
 * Sending rewards exactly once. The dispatch row is written (one INSERT, keyed by tenant + Idempotency-Key) before
 * anything goes upstream; the order carries `external_id` = the dispatch id, so every retry — by this request, by
 * the worker, or after a crash — is deduplicated by the rewards service. The payload sent upstream is fixed at
 * insert time and re-sent byte-for-byte.
 */
@Injectable()
export class RewardDispatchService implements OnModuleDestroy {
  private readonly logger = new Logger(RewardDispatchService.name);
  /**
   * Writes that may be lost in a database crash without harm use asynchronous commit (no WAL flush wait): the
   * `sent` and `queued` updates. Lost, the dispatch falls back to `sending`, its lease expires, and the worker
   * re-sends it — the rewards service answers with the original order for the same external_id. The insert before
   * the upstream call and every `failed` update stay synchronous.
   */
  private readonly relaxed: Pool;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
    private readonly tenants: TenantsService,
    private readonly connections: ConnectionsService,
    private readonly fields: FieldsCacheService,
    private readonly tokens: AccessTokenProvider,
    private readonly api: RewardsApiClient,
    private readonly metrics: MetricsService,
  ) {
    this.relaxed = new Pool({
      connectionString: config.databaseUrl,
      max: Math.max(4, Math.ceil(config.databasePoolSize / 2)),
      application_name: 'rewards-gateway-dispatch',
      options: '-c synchronous_commit=off',
    });
    this.relaxed.on('error', (error) => this.logger.warn(`dispatch pool: ${error.message}`));
  }

  /** TypeORM's own pg pool (same connections and settings as `db.query`), for the hot path's named statements. */
  private pool(): Pool {
    return (this.db.driver as PostgresDriver).master as Pool;
  }

  async onModuleDestroy(): Promise<void> {
    await this.relaxed.end();
  }

  async send(tenantId: string, idempotencyKey: string | undefined, dto: SendRewardsDto, rawBody: unknown): Promise<HttpOutcome> {
    const key = validateKey(idempotencyKey);
    const requestHash = createHash('sha256').update(canonicalJson(rawBody)).digest('hex');
    let prepared: Awaited<ReturnType<RewardDispatchService['prepare']>>;
    try {
      prepared = await this.prepare(tenantId, dto);
    } catch (error) {
      // A key already used wins over today's validation (a replay must not turn into an error).
      const existing = await this.findByKey(tenantId, key);
      if (existing) return this.replay(existing, requestHash);
      throw error;
    }
    const id = randomUUID();
    const upstreamPayload = { external_id: id, ...prepared.payload };
    // A named statement on the driver's own pool: parsed and planned once per connection, not on every send.
    const inserted = await this.pool().query<{ created_at: Date; lease_until: Date }>({
      name: 'rg_dispatch_insert',
      text: `INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, idempotency_key, request_hash, request,
                                           upstream_payload, status, attempts, lease_until, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'sending', 1, now() + make_interval(secs => $9::float8 / 1000), now(), now())
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
             RETURNING created_at, lease_until`,
      values: [id, tenantId, prepared.connectionId, prepared.environment, key, requestHash, prepared.request, upstreamPayload, this.config.dispatch.leaseMs],
    });
    const stamp = inserted.rows[0];
    if (!stamp) {
      const existing = await this.findByKey(tenantId, key);
      if (!existing) throw new AppError(HttpStatus.CONFLICT, 'idempotency_request_in_progress', 'Retry shortly.', [], { 'Retry-After': '1' });
      return this.replay(existing, requestHash);
    }
    // The row as written, built here rather than read back (RETURNING * would parse the JSON columns again).
    const row: DispatchRow = {
      id,
      tenant_id: tenantId,
      connection_id: prepared.connectionId,
      environment: prepared.environment,
      idempotency_key: key,
      request_hash: requestHash,
      request: prepared.request,
      upstream_payload: upstreamPayload,
      status: 'sending',
      attempts: 1,
      next_attempt_at: null,
      lease_until: stamp.lease_until,
      upstream_order_id: null,
      upstream_order: null,
      last_error: null,
      response_status: null,
      response_body: null,
      created_at: stamp.created_at,
      updated_at: stamp.created_at,
      sent_at: null,
    };
    return this.attempt(row);
  }

  /** Everything resolved before the first write: connection, funding source, custom fields (all from caches). */
  private async prepare(tenantId: string, dto: SendRewardsDto) {
    const connection = await this.connections.liveConnection(tenantId, dto.environment);
    const fundingSourceId = dto.funding_source_id ?? (await this.tenants.cached(tenantId)).defaultFundingSourceId;
    if (!fundingSourceId) {
      throw new AppError(HttpStatus.UNPROCESSABLE_ENTITY, 'funding_source_required', 'Name funding_source_id, or set the tenant’s default_funding_source_id.', [
        { field: 'funding_source_id', reason: 'missing, and the tenant has no default' },
      ]);
    }
    let snapshot = await this.fields.get(connection.id);
    let resolution = resolveCustomFields(snapshot.fields, dto.rewards);
    if (resolution.unknown.length) {
      snapshot = await this.fields.forceReload(connection.id); // the field may have been added upstream since
      resolution = resolveCustomFields(snapshot.fields, dto.rewards);
    }
    const error = customFieldsError(resolution);
    if (error) throw error;
    const payload = {
      payment: { funding_source_id: fundingSourceId },
      rewards: dto.rewards.map((r, i) => ({
        value: { denomination: r.value.denomination, currency_code: r.value.currency_code },
        delivery: { method: r.delivery?.method ?? 'EMAIL' },
        recipient: { name: r.recipient.name, email: r.recipient.email },
        products: r.products,
        custom_fields: resolution.resolved[i].map((c) => ({ id: c.id, value: c.value })),
      })),
    };
    return {
      connectionId: connection.id,
      environment: connection.environment,
      payload,
      request: { external_reference: dto.external_reference ?? null, funding_source_id: fundingSourceId, custom_fields: resolution.resolved as ResolvedCustomField[][] },
    };
  }

  private async findByKey(tenantId: string, key: string): Promise<DispatchRow | null> {
    const rows = (await this.db.query(`SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND idempotency_key = $2`, [tenantId, key])) as DispatchRow[];
    return rows[0] ?? null;
  }

  private replay(existing: DispatchRow, requestHash: string): HttpOutcome {
    if (existing.request_hash !== requestHash) {
      throw new AppError(HttpStatus.UNPROCESSABLE_ENTITY, 'idempotency_key_reused', 'This Idempotency-Key was used with a different request body.', [
        { field: 'Idempotency-Key', reason: 'already used with another body', dispatch_id: existing.id },
      ]);
    }
    if (existing.response_status === null) {
      throw new AppError(HttpStatus.CONFLICT, 'idempotency_request_in_progress', 'A request with this Idempotency-Key is still being processed; retry shortly.', [
        { field: 'Idempotency-Key', reason: 'in progress', dispatch_id: existing.id },
      ], { 'Retry-After': '1' });
    }
    // A sent dispatch's answer is its view (the row no longer changes once sent), so it is not stored twice.
    const body = existing.response_body ?? (existing.status === 'sent' ? toView(existing) : null);
    return { status: existing.response_status, body, replayed: true };
  }

  /** One upstream attempt for a dispatch this process holds (status `sending`); records and returns the outcome. */
  async attempt(row: DispatchRow): Promise<HttpOutcome> {
    const env = this.config.rewards[row.environment] as RewardsEnvironmentConfig;
    try {
      if (!row.connection_id) throw new ConnectionNotActiveError('disconnected');
      const res = await this.tokens.withToken(row.connection_id, (token) =>
        this.api.call<{ order: UpstreamOrder }>(env, token.token, 'POST', '/orders', row.upstream_payload, this.config.dispatch.upstreamTimeoutMs),
      );
      return await this.markSent(row, res.body.order, res.status);
    } catch (error) {
      return this.recordFailure(row, error);
    }
  }

  private async markSent(row: DispatchRow, order: UpstreamOrder, upstreamStatus: number): Promise<HttpOutcome> {
    const sentAt = new Date();
    const sent: DispatchRow = { ...row, status: 'sent', upstream_order_id: order.id, upstream_order: order, sent_at: sentAt, last_error: null, next_attempt_at: null };
    const body = toView(sent);
    await this.relaxed.query({
      name: 'rg_dispatch_sent',
      text: `UPDATE reward_dispatches SET status = 'sent', upstream_order_id = $2, upstream_order = $3, sent_at = $4, last_error = NULL,
                    next_attempt_at = NULL, lease_until = NULL, response_status = 201, response_body = NULL, updated_at = now()
              WHERE id = $1 AND status <> 'sent'`,
      values: [row.id, order.id, order, sentAt],
    });
    this.metrics.dispatchAttempts.inc({ outcome: 'sent' });
    if (upstreamStatus === 201) this.logger.log({ dispatchId: row.id, orderId: order.id }, 'order already existed upstream (a retry); not sent twice');
    return { status: 201, body };
  }

  private async recordFailure(row: DispatchRow, error: unknown): Promise<HttpOutcome> {
    const definitive = classify(error);
    if (definitive) {
      const lastError = { code: definitive.code, message: definitive.message, upstream_status: definitive.upstreamStatus, upstream_payload: definitive.upstreamPayload };
      if (definitive.code === 'external_id_conflict') {
        this.logger.error({ dispatchId: row.id }, 'BUG SIGNAL: the rewards service holds another order with this dispatch id as external_id');
      }
      const details: ErrorDetail[] = [{ field: 'dispatch', reason: definitive.message, dispatch_id: row.id, upstream_status: definitive.upstreamStatus, upstream_payload: definitive.upstreamPayload }];
      const body = { error: { code: definitive.code, message: definitive.message, details } };
      this.metrics.dispatchAttempts.inc({ outcome: 'failed' });
      await this.db.query(
        `UPDATE reward_dispatches SET status = 'failed', last_error = $2, lease_until = NULL, next_attempt_at = NULL,
                response_status = $3, response_body = $4, updated_at = now()
          WHERE id = $1 AND status <> 'sent'`,
        [row.id, lastError, definitive.httpStatus, body],
      );
      return { status: definitive.httpStatus, body };
    }
    // Transient: 429, 5xx, timeout, network, a refresh cooldown. Queue a retry — or give up after N attempts.
    const apiError = error instanceof RewardsApiError ? error : null;
    const message = error instanceof Error ? error.message : String(error);
    const lastError = { code: 'upstream_unavailable', message, upstream_status: apiError?.status ?? null, outcome_unknown: apiError?.outcomeUnknown ?? false };
    if (!(error instanceof RewardsApiError) && !(error instanceof AppError)) this.logger.error({ dispatchId: row.id, err: message }, 'unexpected error while sending');
    if (row.attempts >= this.config.dispatch.maxAttempts) {
      const body = { error: { code: 'upstream_unavailable', message: `Gave up after ${row.attempts} attempts: ${message}`, details: [{ field: 'dispatch', reason: message, dispatch_id: row.id }] } };
      await this.db.query(
        `UPDATE reward_dispatches SET status = 'failed', last_error = $2, lease_until = NULL, next_attempt_at = NULL,
                response_status = 503, response_body = $3, updated_at = now() WHERE id = $1 AND status <> 'sent'`,
        [row.id, lastError, body],
      );
      return { status: 503, body };
    }
    this.metrics.dispatchAttempts.inc({ outcome: row.attempts >= this.config.dispatch.maxAttempts ? 'failed' : 'queued' });
    const retryAfterMs = (apiError?.retryAfterSeconds ?? (error instanceof AppError ? Number(error.headers['Retry-After'] ?? 0) : 0)) * 1000;
    const delay = Math.max(retryAfterMs, backoffMs(this.config.dispatch.retryBaseMs, row.attempts));
    const nextAttemptAt = new Date(Date.now() + delay);
    const queued: DispatchRow = { ...row, status: 'queued', last_error: lastError, next_attempt_at: nextAttemptAt };
    const body = toView(queued);
    await this.relaxed.query(
      `UPDATE reward_dispatches SET status = 'queued', last_error = $2, next_attempt_at = $3, lease_until = NULL,
              response_status = 202, response_body = $4, updated_at = now()
        WHERE id = $1 AND status = 'sending'`,
      [row.id, lastError, nextAttemptAt, body],
    );
    return { status: 202, body, headers: { 'Retry-After': String(Math.ceil(delay / 1000)) } };
  }

  async get(tenantId: string, id: string): Promise<unknown> {
    const rows = (await this.db.query(`SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND id = $2`, [tenantId, id])) as DispatchRow[];
    if (!rows[0]) throw new AppError(HttpStatus.NOT_FOUND, 'dispatch_not_found', `No dispatch ${id} for this tenant.`);
    return toView(rows[0]);
  }

  async list(tenantId: string, status: string | undefined, limit = 50, offset = 0): Promise<unknown> {
    await this.tenants.require(tenantId);
    const rows = (await this.db.query(
      `SELECT * FROM reward_dispatches WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)
        ORDER BY created_at DESC, id LIMIT $3 OFFSET $4`,
      [tenantId, status ?? null, limit + 1, offset],
    )) as DispatchRow[];
    return { dispatches: rows.slice(0, limit).map(toView), next_offset: rows.length > limit ? offset + limit : null };
  }
}

function validateKey(key: string | undefined): string {
  if (key === undefined || key.trim() === '') {
    throw new AppError(HttpStatus.BAD_REQUEST, 'idempotency_key_missing', 'Send an Idempotency-Key header (a unique string per reward request, at most 255 characters).', [
      { field: 'Idempotency-Key', reason: 'required' },
    ]);
  }
  if (key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new AppError(HttpStatus.BAD_REQUEST, 'idempotency_key_invalid', 'The Idempotency-Key must be 1–255 visible ASCII characters.', [
      { field: 'Idempotency-Key', reason: key.length > 255 ? 'longer than 255 characters' : 'contains spaces or non-ASCII characters' },
    ]);
  }
  return key;
}

export function backoffMs(baseMs: number, attempts: number): number {
  const exp = Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(exp / 2 + Math.random() * (exp / 2)); // "equal jitter": spread, but never near zero
}

interface Definitive {
  code: string;
  message: string;
  httpStatus: number;
  upstreamStatus: number | null;
  upstreamPayload: unknown;
}

/** Definitive failures (no retry can help); null for transient ones. */
function classify(error: unknown): Definitive | null {
  if (error instanceof ConnectionNotActiveError) {
    return { code: 'connection_not_active', message: error.message, httpStatus: 409, upstreamStatus: null, upstreamPayload: null };
  }
  if (!(error instanceof RewardsApiError) || error.kind !== 'rejected') return null;
  const payload = (error.body as { errors?: { payload?: unknown } })?.errors?.payload ?? null;
  if (error.status === 402) return { code: 'insufficient_funds', message: 'The funding source does not hold enough funds for this order.', httpStatus: 422, upstreamStatus: 402, upstreamPayload: payload };
  if (error.status === 409) return { code: 'external_id_conflict', message: 'The rewards service holds a different order with this dispatch id.', httpStatus: 422, upstreamStatus: 409, upstreamPayload: payload };
  return { code: 'upstream_rejected', message: `The rewards service rejected the order: ${error.message}`, httpStatus: 422, upstreamStatus: error.status, upstreamPayload: payload };
}
