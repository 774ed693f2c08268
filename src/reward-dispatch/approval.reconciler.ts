import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Clock } from '../common/clock';
import type { DispatchConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';
import { RewardsApiError, mapUpstreamError } from '../rewards-api/rewards-api.errors';
import { orderOutcome } from '../rewards-api/rewards-api.types';
import { RewardsApi } from '../token-vault/rewards-api.service';
import { ConnectionNotActiveError, ConnectionNotFoundError } from '../token-vault/token-vault.errors';
import { DispatchStore, type RewardUpdate } from './dispatch.store';
import type { RewardRow } from './dispatch.view';
import { backoffMs } from './dispatch.sender';
import { OnePass, runEvery } from '../common/schedule';
import { rootSpan } from '../common/tracing';
import { serving } from '../common/request-context';

/** Checks one instance makes per pass at most: a backlog drains over several passes, never in a burst. */
const CHECKS_PER_PASS = 10;

/**
 * Orders held for approval upstream: each pass, on every instance, claims due rewards one at a time (SKIP LOCKED),
 * reads the order and settles the reward (`sent`, or `failed` when rejected or failed) or checks again later.
 */
@Injectable()
export class ApprovalReconciler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ApprovalReconciler.name);
  private readonly pass = new OnePass();

  constructor(
    @InjectConfig('dispatch') private readonly config: DispatchConfig,
    private readonly store: DispatchStore,
    private readonly rewardsApi: RewardsApi,
    private readonly metrics: MetricsService,
    private readonly scheduler: SchedulerRegistry,
    private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    const every = Math.max(50, Math.min(this.config.approvalCheckMs, this.config.pollMs * 5));
    runEvery(this.scheduler, 'approval-reconciler', every, () => void this.tick());
  }

  onModuleDestroy(): Promise<void> {
    return this.pass.stop();
  }

  /** One pass; returns how many rewards were checked. */
  tick(): Promise<number> {
    return this.pass.run(() => this.checkDue());
  }

  private async checkDue(): Promise<number> {
    let checked = 0;
    try {
      while (checked < CHECKS_PER_PASS && !this.pass.isStopped) {
        const reward = await this.store.claimApprovalCheck();
        if (!reward) break;
        checked += 1;
        await rootSpan(
          'approval.check',
          async () => this.store.settleApproval(reward.dispatch_id, await this.check(reward)),
          { 'dispatch.id': reward.dispatch_id },
        );
      }
    } catch (error) {
      this.logger.warn(
        `approval reconciliation pass failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    return checked;
  }

  private async check(reward: RewardRow & { connection_id: string | null }): Promise<RewardUpdate> {
    const { dispatch_id: dispatchId, connection_id: connectionId, position, attempts } = reward;
    const orderId = reward.upstream_order_id ?? reward.external_id;
    const later = (ms = this.config.approvalCheckMs): RewardUpdate => ({
      position,
      status: 'pending_approval',
      last_error: null,
      next_check_at: new Date(this.clock.now() + ms),
    });
    if (!connectionId) return later(60 * 60_000);
    try {
      const order = await serving({ dispatchId, rewardPosition: position }, () =>
        this.rewardsApi.forConnection(connectionId, 'bulk').getOrder(orderId),
      );
      const outcome = orderOutcome(order.status);
      const upstream = {
        upstream_order_status: order.status,
        delivery_status: order.rewards[0]?.delivery?.status ?? null,
      };
      if (outcome === 'held') return { ...later(), ...upstream };
      this.metrics.dispatchAttempts.inc({ outcome: outcome === 'executed' ? 'approved' : 'rejected' });
      const settled = { position, ...upstream, next_check_at: null };
      if (outcome === 'executed')
        return { ...settled, status: 'sent', last_error: null, sent_at: new Date(this.clock.now()) };
      const rejected = order.status.toUpperCase().startsWith('CANCEL');
      return {
        ...settled,
        status: 'failed',
        last_error: {
          code: rejected ? 'order_rejected' : 'order_failed',
          message: rejected
            ? 'The order was rejected while held for approval (the service canceled it).'
            : `The order held for approval ended ${order.status}.`,
        },
      };
    } catch (error) {
      if (error instanceof ConnectionNotActiveError || error instanceof ConnectionNotFoundError)
        return later(60 * 60_000);
      const transient = !(error instanceof RewardsApiError) || mapUpstreamError(error).retryable;
      this.logger.warn(
        { orderId, err: error instanceof Error ? error.message : String(error) },
        'could not check an order held for approval',
      );
      return later(transient ? backoffMs(this.config.approvalCheckMs, Math.min(attempts, 6)) : 60 * 60_000);
    }
  }
}
