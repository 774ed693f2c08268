import { HttpStatus, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { AuditLog } from '../audit/audit-log.service';
import { sha256Hex } from '../common/digest';
import { type ErrorDetail, ValidationFailedError } from '../common/app-error';
import { canonicalJson } from '../common/canonical-json';
import { Clock } from '../common/clock';
import type { DispatchConfig, RewardsConfig, RewardsEnvironmentConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
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
import { span } from '../common/tracing';
import { DispatchStore, type NewDispatch, type NewReward, REWARD_PAGE } from './dispatch.store';
import {
  type DispatchRow,
  type RewardRow,
  type RewardStatus,
  countsOf,
  dueAt,
  failureBody,
  httpStatusOf,
  progressOf,
} from './dispatch.view';
import { DispatchWorker } from './dispatch.worker';
import { AccountPacer, spacingMs } from '../rewards-api/account-pacer';
import type { RewardSpecDto, SendRewardsDto } from './dto/send-rewards.dto';
import {
  DispatchError,
  keyInProgress,
  keyInvalid,
  keyMissing,
  keyReused,
  notCancellable,
} from './reward-dispatch.errors';
import type { EraseRecipientDto } from './dto/erase-recipient.dto';
import { Database } from '../database/database';
import { eraseFromOutbox } from '../tenant-webhooks/webhook.store';

/** The funding source used when neither the request nor the tenant names one (the service's magic value). */
const DEFAULT_FUNDING_SOURCE = 'BALANCE';

/**
 * Sending rewards exactly once: the dispatch and its rewards are stored (keyed by tenant + Idempotency-Key) before
 * anything goes upstream, each order with an external_id derived from the dispatch and the reward's position, so the
 * rewards service deduplicates every retry (this request, the worker, after a crash). What goes upstream is fixed at
 * insert time and re-sent byte-for-byte.
 */
@Injectable()
export class RewardDispatchService {
  constructor(
    @InjectConfig('dispatch') private readonly config: DispatchConfig,
    @InjectConfig('rewards') private readonly environments: RewardsConfig,
    private readonly store: DispatchStore,
    private readonly sender: DispatchSender,
    private readonly tenants: TenantsService,
    private readonly connections: ConnectionsService,
    private readonly fields: FieldsCacheService,
    private readonly tokens: AccessTokenProvider,
    private readonly worker: DispatchWorker,
    private readonly audit: AuditLog,
    private readonly db: Database,
    private readonly pacer: AccountPacer,
    private readonly clock: Clock,
  ) {}

  /**
   * Erasure of one recipient of the tenant (`email` or `phone`): redacted in every stored dispatch and reward (a reward
   * not sent yet is cancelled) and in the events waiting for delivery. Audited without the recipient.
   */
  async erase(
    tenantId: string,
    recipient: EraseRecipientDto,
  ): Promise<{ dispatches: number; rewards: number; outbox_events: number }> {
    await this.tenants.require(tenantId);
    const changed = await this.store.eraseRecipient(tenantId, recipient);
    const needle = recipient.email ?? recipient.phone ?? '';
    const outbox_events = await eraseFromOutbox(this.db.main, tenantId, needle);
    const counts = { ...changed, outbox_events };
    await this.audit.recordCommitted('recipient.erased', {
      tenantId,
      target: { type: 'recipient', id: null },
      details: { by: recipient.email !== undefined ? 'email' : 'phone', ...counts },
    });
    return counts;
  }

  async send(
    tenantId: string,
    idempotencyKey: string | undefined,
    dto: SendRewardsDto,
    rawBody: unknown,
    {
      respondAsync = false,
      arrivedAt = this.clock.now(),
    }: { respondAsync?: boolean; arrivedAt?: number } = {},
  ): Promise<HttpOutcome> {
    const key = validateKey(idempotencyKey);
    const requestHash = sha256Hex(canonicalJson(rawBody));
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
    // A batch is stored and answered at once, sent by the workers behind interactive sends; so is a send whose
    // account's next slot is already known to lie beyond the interactive bound (due when that slot comes).
    const batch = dto.rewards.length > this.config.inlineMaxRewards;
    const beyondBound =
      batch || respondAsync
        ? 0
        : this.knownWaitBeyondBound(prepared.connectionId, prepared.environment, arrivedAt);
    const answerNow = batch || respondAsync || beyondBound > 0;
    // The first order's rewards are marked `sending` by the insert itself: the call follows at once.
    const first = answerNow ? 0 : shape === 'array' ? prepared.rewards.length : 1;
    const newRewards: NewReward[] = prepared.rewards.map((payload, position) => ({
      position,
      external_id: shape === 'array' ? id : `${id}-r${position}`,
      status: position < first ? 'sending' : 'pending',
      payload,
      attempts: position < first ? 1 : 0,
    }));
    const row: NewDispatch = {
      id,
      tenant_id: tenantId,
      connection_id: prepared.connectionId,
      environment: prepared.environment.name,
      order_shape: shape,
      idempotency_key: key,
      request_hash: requestHash,
      request: prepared.request,
      upstream_payload: { payment: { funding_source_id: prepared.request.funding_source_id } },
      status: answerNow ? 'queued' : 'sending',
      attempts: answerNow ? 0 : 1,
      next_attempt_at: beyondBound > 0 ? new Date(this.clock.now() + beyondBound) : null,
      upstream_order_id: null,
      last_error: null,
      response_status: null,
      response_body: null,
      sent_at: null,
      reward_count: newRewards.length,
      priority: batch ? 1 : 0,
    };
    const stored = await span('dispatch.insert', () => this.store.insert(row, newRewards), {
      'tenant.id': tenantId,
      'dispatch.id': id,
    });
    if (!stored) {
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
    // The rows as written, built here rather than read back (a batch's answer lists only its first page).
    const rewards: RewardRow[] = newRewards.slice(0, answerNow ? REWARD_PAGE : undefined).map((r) => ({
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
    if (answerNow) {
      this.worker.nudge();
      return this.accepted(stored, rewards, countsOf(newRewards));
    }
    const marked = new Set(newRewards.filter((r) => r.status === 'sending').map((r) => r.position));
    const outcome = await this.sender.run(stored, rewards, { inline: true, marked, arrivedAt });
    return stored.status === 'queued' ? this.accepted(stored, rewards, countsOf(rewards)) : outcome;
  }

  /**
   * A dispatch left `queued` for the workers answers 202: the dispatch with its progress and estimate (from when it is
   * due, at the account's pace), `Location`, and `Retry-After` (the estimated completion).
   */
  private accepted(
    row: DispatchRow,
    rewards: RewardRow[],
    counts: Record<RewardStatus, number>,
  ): HttpOutcome {
    const now = this.clock.now();
    const due = dueAt(row, now);
    const progress = this.progress(row, counts, due);
    const until = progress.estimated_completion_at ? Date.parse(progress.estimated_completion_at) : due;
    return {
      status: 202,
      body: this.sender.view(row, rewards, { counts, progress }),
      headers: {
        Location: `/v1/tenants/${encodeURIComponent(row.tenant_id)}/dispatches/${row.id}`,
        'Retry-After': String(Math.max(1, Math.ceil((until - now) / 1000))),
      },
    };
  }

  /** Counts and progress of a dispatch: from the rewards at hand when they are all of them, else counted stored. */
  private async storedProgress(row: DispatchRow, rewards: RewardRow[]) {
    const counts =
      rewards.length >= row.reward_count
        ? countsOf(rewards)
        : ((await this.store.countsOf([row.id])).get(row.id) as Record<RewardStatus, number>);
    return { counts, progress: this.progress(row, counts, dueAt(row, this.clock.now())) };
  }

  /** How far out the account's next slot is known to be (ms) when beyond what is left of the interactive bound; else 0. */
  private knownWaitBeyondBound(
    connectionId: string,
    environment: RewardsEnvironmentConfig,
    arrivedAt: number,
  ): number {
    if (environment.pacing.rps <= 0) return 0;
    const wait = this.pacer.knownWaitMs(connectionId);
    return wait > arrivedAt + this.config.interactiveMaxWaitMs - this.clock.now() ? wait : 0;
  }

  /** Progress with the estimate at the account's configured pace (none when pacing is off), from `fromMs`. */
  private progress(row: DispatchRow, counts: Record<RewardStatus, number>, fromMs: number) {
    const pacing = this.environments[row.environment]?.pacing;
    return progressOf(counts, pacing && pacing.rps > 0 ? spacingMs(pacing) : null, fromMs);
  }

  /**
   * Everything resolved before the first write: connection, funding source, custom fields (all from caches). The body
   * passed SendBodyPipe (its schema, at most DISPATCH_MAX_REWARDS rewards).
   */
  private async prepare(tenantId: string, dto: SendRewardsDto) {
    checkRecipients(dto.rewards);
    const connection = await this.connections.liveConnection(tenantId, dto.environment);
    const environment = this.environments[connection.environment] as RewardsEnvironmentConfig;
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
    const warnings = duplicateRecipients(rewards);
    return {
      connectionId: connection.id,
      environment,
      rewards,
      request: {
        external_reference: dto.external_reference ?? null,
        funding_source_id: fundingSourceId,
        custom_fields: resolution.resolved as ResolvedCustomField[][],
        ...(warnings.length ? { warnings } : {}),
      },
    };
  }

  /** Refused app credentials are said before anything is stored: the same key can be retried once they are fixed. */
  private async checkAppCredentials(connectionId: string): Promise<void> {
    try {
      await this.tokens.getAccessToken(connectionId);
    } catch (error) {
      // Anything else (a dead grant, a refresh cooldown) is met again by the attempt, which records it.
      if (error instanceof AppCredentialsInvalidError) throw error;
    }
  }

  private async replay(existing: DispatchRow, requestHash: string): Promise<HttpOutcome> {
    if (existing.request_hash !== requestHash) throw keyReused(existing.id);
    if (existing.response_status === null) throw keyInProgress(existing.id);
    return { ...(await this.outcomeOf(existing)), replayed: true };
  }

  /** What the dispatch answers now: its view (201/202), or for a dispatch whose every reward failed, the error. */
  private async outcomeOf(row: DispatchRow): Promise<HttpOutcome> {
    const rewards = await this.rewardsOf(row);
    if (row.status === 'failed' || row.status === 'cancelled') {
      // Rows from before per-reward orders kept their answer.
      if (row.response_body && row.response_status)
        return { status: row.response_status, body: row.response_body };
      return failureBody(row, rewards);
    }
    if (row.status === 'queued') {
      const { counts } = await this.storedProgress(row, rewards);
      return this.accepted(row, rewards, counts);
    }
    return { status: httpStatusOf(row.status), body: await this.view(row, rewards) };
  }

  private async view(row: DispatchRow, rewards: RewardRow[]) {
    return this.sender.view(row, rewards, await this.storedProgress(row, rewards));
  }

  private async rewardsOf(row: DispatchRow, limit?: number, offset?: number): Promise<RewardRow[]> {
    return (await this.store.rewardsOf([row.id], limit, offset)).get(row.id) ?? [];
  }

  async get(tenantId: string, id: string): Promise<unknown> {
    const row = await this.require(tenantId, id);
    return this.view(row, await this.rewardsOf(row));
  }

  /** One page of a dispatch's rewards, in position order (a batch's view lists only the first REWARD_PAGE). */
  async rewardsPage(tenantId: string, id: string, limit = 100, offset = 0): Promise<unknown> {
    const row = await this.require(tenantId, id);
    const rewards = await this.rewardsOf(row, limit + 1, offset);
    return {
      rewards: this.sender.view(row, rewards.slice(0, limit)).rewards,
      next_offset: rewards.length > limit ? offset + limit : null,
    };
  }

  /** Cancels what of a dispatch is not sent yet (see DispatchStore.cancel); 409 when it is settled already. */
  async cancel(tenantId: string, id: string): Promise<unknown> {
    const row = await this.require(tenantId, id);
    if (!(await this.store.cancel(tenantId, id))) throw notCancellable(id, row.status);
    await this.audit.recordCommitted('dispatch.cancelled', { tenantId, target: { type: 'dispatch', id } });
    return this.get(tenantId, id);
  }

  private async require(tenantId: string, id: string): Promise<DispatchRow> {
    const row = await this.store.find(tenantId, id);
    if (!row)
      throw new DispatchError(
        HttpStatus.NOT_FOUND,
        'dispatch_not_found',
        `No dispatch ${id} for this tenant.`,
      );
    return row;
  }

  async list(tenantId: string, status: string | undefined, limit = 50, offset = 0): Promise<unknown> {
    await this.tenants.require(tenantId);
    const rows = await this.store.list(tenantId, status, limit + 1, offset);
    const page = rows.slice(0, limit);
    const ids = page.map((r) => r.id);
    const [rewards, counts] = await Promise.all([this.store.rewardsOf(ids), this.store.countsOf(ids)]);
    const now = this.clock.now();
    return {
      dispatches: page.map((r) => {
        const c = counts.get(r.id) as Record<RewardStatus, number>;
        return this.sender.view(r, rewards.get(r.id) ?? [], {
          counts: c,
          progress: this.progress(r, c, now),
        });
      }),
      next_offset: rows.length > limit ? offset + limit : null,
    };
  }
}

/** Rewards to a recipient an earlier reward already goes to (same e-mail in any case, or phone): allowed but flagged. */
function duplicateRecipients(rewards: UpstreamRewardSpec[]): ErrorDetail[] {
  const seen = new Map<string, number>();
  const warnings: ErrorDetail[] = [];
  rewards.forEach((r, i) => {
    const key = r.recipient.email
      ? `e:${r.recipient.email.toLowerCase()}`
      : r.recipient.phone
        ? `p:${r.recipient.phone.replace(/[^0-9+]/g, '')}`
        : null;
    if (key === null) return;
    const first = seen.get(key);
    if (first === undefined) seen.set(key, i);
    else if (warnings.length < 100)
      warnings.push({
        field: `rewards[${i}].recipient`,
        reason: `same recipient as rewards[${first}] (allowed; sent twice)`,
        code: 'duplicate_recipient',
      });
  });
  return warnings;
}

/** What each delivery method needs of the recipient, and products or a campaign: checked before any lookup. */
function checkRecipients(rewards: RewardSpecDto[]): void {
  const problems: ErrorDetail[] = [];
  rewards.forEach((r, i) => {
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
  if (key === undefined || key.trim() === '') throw keyMissing();
  if (key.length > 255 || !/^[\x21-\x7e]+$/.test(key))
    throw keyInvalid(
      key.length > 255 ? 'longer than 255 characters' : 'contains spaces or non-ASCII characters',
    );
  return key;
}
