import { HttpStatus, Inject, Injectable } from '@nestjs/common';
import { createHash, randomUUID } from 'node:crypto';
import { type ErrorDetail, ValidationFailedError } from '../common/app-error';
import { canonicalJson } from '../common/canonical-json';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig, RewardsEnvironmentConfig } from '../config/app-config';
import { ConnectionsService } from '../connections/connections.service';
import {
  customFieldsError,
  resolveCustomFields,
  type ResolvedCustomField,
} from '../fields-cache/custom-fields';
import { FieldsCacheService } from '../fields-cache/fields-cache.service';
import type { UpstreamRewardSpec } from '../rewards-api/rewards-api.types';
import { TenantsService } from '../tenants/tenants.service';
import { AccessTokenProvider } from '../token-vault/access-token.provider';
import { AppCredentialsInvalidError } from '../token-vault/token-vault.errors';
import { DispatchSender, type HttpOutcome } from './dispatch.sender';
import { DispatchStore, type NewReward } from './dispatch.store';
import { type DispatchRow, type RewardRow, failureBody, httpStatusOf } from './dispatch.view';
import type { RewardSpecDto, SendRewardsDto } from './dto/send-rewards.dto';
import { DispatchError } from './reward-dispatch.errors';

export { backoffMs, type HttpOutcome } from './dispatch.sender';

/** The funding source used when neither the request nor the tenant names one (the service's magic value). */
export const DEFAULT_FUNDING_SOURCE = 'BALANCE';

/**
 * Sending rewards exactly once. The dispatch and one row per reward are written (one INSERT, keyed by tenant +
 * Idempotency-Key) before anything goes upstream; every reward's order carries an external_id derived from the
 * dispatch and the reward's position, so every retry — by this request, by the worker, or after a crash — is
 * deduplicated by the rewards service. What goes upstream is fixed at insert time and re-sent byte-for-byte.
 */
@Injectable()
export class RewardDispatchService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly store: DispatchStore,
    private readonly sender: DispatchSender,
    private readonly tenants: TenantsService,
    private readonly connections: ConnectionsService,
    private readonly fields: FieldsCacheService,
    private readonly tokens: AccessTokenProvider,
  ) {}

  async send(
    tenantId: string,
    idempotencyKey: string | undefined,
    dto: SendRewardsDto,
    rawBody: unknown,
  ): Promise<HttpOutcome> {
    const key = validateKey(idempotencyKey);
    const requestHash = createHash('sha256').update(canonicalJson(rawBody)).digest('hex');
    let prepared: Awaited<ReturnType<RewardDispatchService['prepare']>>;
    try {
      prepared = await this.prepare(tenantId, dto);
    } catch (error) {
      // A key already used wins over today's validation (a replay must not turn into an error).
      const existing = await this.store.findByKey(tenantId, key);
      if (existing) return this.replay(existing, requestHash);
      throw error;
    }
    const id = randomUUID();
    const shape = prepared.environment.orderShape;
    // The first order's rewards are marked `sending` by the insert itself: the call follows at once.
    const first = shape === 'array' ? prepared.rewards.length : 1;
    const newRewards: NewReward[] = prepared.rewards.map((payload, position) => ({
      position,
      external_id: shape === 'array' ? id : `${id}-r${position}`,
      status: position < first ? 'sending' : 'pending',
      payload,
      attempts: position < first ? 1 : 0,
    }));
    const row: Omit<DispatchRow, 'created_at' | 'updated_at' | 'lease_until'> = {
      id,
      tenant_id: tenantId,
      connection_id: prepared.connectionId,
      environment: prepared.environment.name,
      order_shape: shape,
      idempotency_key: key,
      request_hash: requestHash,
      request: prepared.request,
      upstream_payload: { payment: { funding_source_id: prepared.request.funding_source_id } },
      status: 'sending',
      attempts: 1,
      next_attempt_at: null,
      upstream_order_id: null,
      last_error: null,
      response_status: null,
      response_body: null,
      sent_at: null,
    };
    const stamp = await this.store.insert(row, newRewards);
    if (!stamp) {
      const existing = await this.store.findByKey(tenantId, key);
      if (!existing)
        throw new DispatchError(
          HttpStatus.CONFLICT,
          'idempotency_request_in_progress',
          'Retry shortly.',
          [],
          { 'Retry-After': '1' },
        );
      return this.replay(existing, requestHash);
    }
    // The rows as written, built here rather than read back.
    const rewards: RewardRow[] = newRewards.map((r) => ({
      dispatch_id: id,
      position: r.position,
      external_id: r.external_id,
      status: r.status,
      upstream_payload: r.payload as UpstreamRewardSpec,
      attempts: r.attempts,
      upstream_order_id: null,
      upstream_reward_id: null,
      upstream_order_status: null,
      delivery_method: (r.payload as UpstreamRewardSpec).delivery.method,
      delivery_status: null,
      link_enc: null,
      last_error: null,
      sent_at: null,
    }));
    const marked = new Set(newRewards.filter((r) => r.status === 'sending').map((r) => r.position));
    return this.sender.run(
      { ...row, created_at: stamp.created_at, updated_at: stamp.created_at, lease_until: stamp.lease_until },
      rewards,
      marked,
    );
  }

  /** Everything resolved before the first write: connection, funding source, custom fields (all from caches). */
  private async prepare(tenantId: string, dto: SendRewardsDto) {
    checkRecipients(dto.rewards);
    const connection = await this.connections.liveConnection(tenantId, dto.environment);
    const environment = this.config.rewards[connection.environment] as RewardsEnvironmentConfig;
    await this.checkAppCredentials(connection.id);
    const fundingSourceId =
      dto.funding_source_id ??
      (await this.tenants.cached(tenantId)).defaultFundingSourceId ??
      DEFAULT_FUNDING_SOURCE;
    let snapshot = await this.fields.get(connection.id);
    let resolution = resolveCustomFields(snapshot.fields, dto.rewards);
    if (resolution.unknown.length) {
      snapshot = await this.fields.forceReload(connection.id); // the field may have been added upstream since
      resolution = resolveCustomFields(snapshot.fields, dto.rewards);
    }
    const error = customFieldsError(resolution);
    if (error) throw error;
    const rewards: UpstreamRewardSpec[] = dto.rewards.map((r, i) => ({
      value: { denomination: r.value.denomination, currency_code: r.value.currency_code },
      delivery: { method: r.delivery?.method ?? 'EMAIL' },
      recipient: {
        name: r.recipient.name,
        ...(r.recipient.email ? { email: r.recipient.email } : {}),
        ...(r.recipient.phone ? { phone: r.recipient.phone } : {}),
      },
      ...(r.products ? { products: r.products } : {}),
      ...(r.campaign_id ? { campaign_id: r.campaign_id } : {}),
      custom_fields: resolution.resolved[i].map((c) => ({ id: c.id, value: c.value })),
    }));
    return {
      connectionId: connection.id,
      environment,
      rewards,
      request: {
        external_reference: dto.external_reference ?? null,
        funding_source_id: fundingSourceId,
        custom_fields: resolution.resolved as ResolvedCustomField[][],
      },
    };
  }

  /**
   * When the gateway's own app credentials are being refused, say so before anything is stored: the caller can retry
   * the same key once an operator has fixed them. (Usually a memory hit: a valid token needs no credentials.)
   */
  private async checkAppCredentials(connectionId: string): Promise<void> {
    try {
      await this.tokens.getAccessToken(connectionId);
    } catch (error) {
      if (error instanceof AppCredentialsInvalidError) throw error;
      // Anything else (a dead grant, a refresh cooldown) is met again by the attempt, which records it on the dispatch.
    }
  }

  private async replay(existing: DispatchRow, requestHash: string): Promise<HttpOutcome> {
    if (existing.request_hash !== requestHash) {
      throw new DispatchError(
        HttpStatus.UNPROCESSABLE_ENTITY,
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request body.',
        [{ field: 'Idempotency-Key', reason: 'already used with another body', dispatch_id: existing.id }],
      );
    }
    if (existing.response_status === null) {
      throw new DispatchError(
        HttpStatus.CONFLICT,
        'idempotency_request_in_progress',
        'A request with this Idempotency-Key is still being processed; retry shortly.',
        [{ field: 'Idempotency-Key', reason: 'in progress', dispatch_id: existing.id }],
        { 'Retry-After': '1' },
      );
    }
    return { ...(await this.outcomeOf(existing)), replayed: true };
  }

  /** What the dispatch answers now: its view (201/202), or for a dispatch whose every reward failed, the error. */
  private async outcomeOf(row: DispatchRow): Promise<HttpOutcome> {
    const rewards = (await this.store.rewardsOf([row.id])).get(row.id) ?? [];
    if (row.status === 'failed' || row.status === 'cancelled') {
      // Rows from before per-reward orders kept their answer.
      if (row.response_body && row.response_status)
        return { status: row.response_status, body: row.response_body };
      return failureBody(row, rewards);
    }
    return { status: httpStatusOf(row.status), body: this.sender.view(row, rewards) };
  }

  async get(tenantId: string, id: string): Promise<unknown> {
    const row = await this.store.find(tenantId, id);
    if (!row)
      throw new DispatchError(
        HttpStatus.NOT_FOUND,
        'dispatch_not_found',
        `No dispatch ${id} for this tenant.`,
      );
    const rewards = (await this.store.rewardsOf([row.id])).get(row.id) ?? [];
    return this.sender.view(row, rewards);
  }

  async list(tenantId: string, status: string | undefined, limit = 50, offset = 0): Promise<unknown> {
    await this.tenants.require(tenantId);
    const rows = await this.store.list(tenantId, status, limit + 1, offset);
    const page = rows.slice(0, limit);
    const rewards = await this.store.rewardsOf(page.map((r) => r.id));
    return {
      dispatches: page.map((r) => this.sender.view(r, rewards.get(r.id) ?? [])),
      next_offset: rows.length > limit ? offset + limit : null,
    };
  }
}

/** What each delivery method needs of the recipient, and products or a campaign: checked before any lookup. */
function checkRecipients(rewards: RewardSpecDto[]): void {
  const problems: ErrorDetail[] = [];
  rewards.forEach((r, i) => {
    if (!r || typeof r !== 'object' || Array.isArray(r) || !r.recipient || typeof r.recipient !== 'object') {
      problems.push({ field: `rewards[${i}]`, reason: 'must be an object with a recipient' });
      return;
    }
    const method = r.delivery?.method ?? 'EMAIL';
    if (method === 'EMAIL' && !r.recipient.email)
      problems.push({ field: `rewards[${i}].recipient.email`, reason: 'required for EMAIL delivery' });
    if (method === 'PHONE' && !r.recipient.phone)
      problems.push({ field: `rewards[${i}].recipient.phone`, reason: 'required for PHONE delivery' });
    if (!r.products && !r.campaign_id)
      problems.push({ field: `rewards[${i}].products`, reason: 'name products, or a campaign_id' });
  });
  if (problems.length) throw new ValidationFailedError(problems);
}

function validateKey(key: string | undefined): string {
  if (key === undefined || key.trim() === '') {
    throw new DispatchError(
      HttpStatus.BAD_REQUEST,
      'idempotency_key_missing',
      'Send an Idempotency-Key header (a unique string per reward request, at most 255 characters).',
      [{ field: 'Idempotency-Key', reason: 'required' }],
    );
  }
  if (key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new DispatchError(
      HttpStatus.BAD_REQUEST,
      'idempotency_key_invalid',
      'The Idempotency-Key must be 1–255 visible ASCII characters.',
      [
        {
          field: 'Idempotency-Key',
          reason: key.length > 255 ? 'longer than 255 characters' : 'contains spaces or non-ASCII characters',
        },
      ],
    );
  }
  return key;
}
