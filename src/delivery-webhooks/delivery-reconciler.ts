import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Clock } from '../common/clock';
import { OnePass, runEvery } from '../common/schedule';
import { InjectConfig } from '../config/config.module';
import type { DispatchConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { DispatchStore } from '../reward-dispatch/dispatch.store';
import { RewardsApiError } from '../rewards-api/rewards-api.errors';
import { RewardsApi } from '../token-vault/rewards-api.service';
import { WebhookRegistrar, isGone } from './webhook-registrar';
import { rootSpan } from '../common/tracing';
import { serving } from '../common/request-context';

/** Rewards one instance checks per pass at most (each a paced, bulk-priority `GET /rewards/{id}`). */
export const CHECKS_PER_PASS = 20;
const CHECK_TIMEOUT_MS = 10_000;
/** Handled webhook uuids are kept this long (the service's retries and replays fall well within it). */
export const EVENTS_KEPT_DAYS = 30;
const FAILURE_REASON = /^[A-Za-z0-9_.-]{1,100}$/;
type DueCheck = Awaited<ReturnType<DispatchStore['claimDeliveryChecks']>>[number];

/**
 * What a read of a reward (`GET /rewards/{id}`) says of its delivery at `now`: SUCCEEDED → delivered, FAILED →
 * delivery_failed (with the service's reason when it is a plain code), anything else → still pending. A final state is
 * as of now; "still pending" is dated by the reward's creation instead: a webhook's final event (timed by the
 * service's clock) must never lose against a poll that merely saw it not final yet.
 */
export function deliveryOutcome(
  upstream: { created_at?: unknown; delivery?: { status?: unknown; failure_reason?: unknown } | null },
  now: number,
) {
  const status = (typeof upstream.delivery?.status === 'string' ? upstream.delivery.status : '')
    .toUpperCase()
    .slice(0, 64);
  const state: 'delivered' | 'delivery_failed' | 'pending' =
    status === 'SUCCEEDED' ? 'delivered' : status === 'FAILED' ? 'delivery_failed' : 'pending';
  const failure = upstream.delivery?.failure_reason;
  const reason =
    state === 'delivery_failed' && typeof failure === 'string' && FAILURE_REASON.test(failure)
      ? failure
      : null;
  const created = typeof upstream.created_at === 'string' ? Date.parse(upstream.created_at) : NaN;
  const eventAt = new Date(state === 'pending' && Number.isFinite(created) && created < now ? created : now);
  return { state, status: status || 'UNKNOWN', reason, eventAt };
}

/**
 * The background job of every instance: retries due webhook registrations, and reconciles deliveries whose webhook
 * was missed — rewards not final `DELIVERY_RECONCILE_AFTER_MS` after sending are claimed (SKIP LOCKED; the claim pushes
 * the next check out by `DELIVERY_RECHECK_MS`), read with `GET /rewards/{id}` at bulk priority and applied with
 * `recordDelivery`. A reward the service does not know (404), or whose connection is gone, is not checked again.
 */
@Injectable()
export class DeliveryReconciler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(DeliveryReconciler.name);
  private readonly pass = new OnePass();

  constructor(
    @InjectConfig('dispatch') private readonly config: DispatchConfig,
    private readonly store: DispatchStore,
    private readonly rewardsApi: RewardsApi,
    private readonly registrar: WebhookRegistrar,
    private readonly metrics: MetricsService,
    private readonly scheduler: SchedulerRegistry,
    private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    runEvery(
      this.scheduler,
      'delivery-reconciler',
      this.config.deliveryReconcilePollMs,
      () => void this.tick(),
    );
  }

  onModuleDestroy(): Promise<void> {
    return this.pass.stop();
  }

  /** One pass (never two at once in a process); returns how many rewards were checked. */
  tick(): Promise<number> {
    return this.pass.run(async () => {
      await this.step('webhook registration retry', () => this.registrar.retryDue());
      return this.step('delivery reconciliation', () => this.reconcile());
    });
  }

  private async step(what: string, run: () => Promise<number>): Promise<number> {
    try {
      return await run();
    } catch (error) {
      this.logger.warn(`${what} pass failed: ${error instanceof Error ? error.message : String(error)}`);
      return 0;
    }
  }

  async reconcile(): Promise<number> {
    const due = await this.store.claimDeliveryChecks(CHECKS_PER_PASS, this.config.deliveryRecheckMs);
    for (const reward of due) {
      if (this.pass.isStopped) break;
      const outcome = await rootSpan('delivery.check', () => this.check(reward), {
        'dispatch.id': reward.dispatch_id,
      });
      this.metrics.deliveryReconciliations.inc({ outcome });
    }
    return due.length;
  }

  private async check(reward: DueCheck): Promise<string> {
    let upstream;
    try {
      upstream = await serving({ dispatchId: reward.dispatch_id, rewardPosition: reward.position }, () =>
        this.rewardsApi
          .forConnection(reward.connection_id, 'bulk')
          .getReward(reward.upstream_reward_id, CHECK_TIMEOUT_MS),
      );
    } catch (error) {
      const gone = isGone(error);
      const unknown = error instanceof RewardsApiError && error.status === 404;
      if (gone || unknown) {
        await this.store.stopDeliveryCheck(reward.dispatch_id, reward.position);
        return gone ? 'connection_gone' : 'not_found';
      }
      // Checked again after DELIVERY_RECHECK_MS (the claim already pushed it out).
      this.logger.warn(
        {
          dispatchId: reward.dispatch_id,
          position: reward.position,
          err: error instanceof Error ? error.message : String(error),
        },
        'could not read a reward’s delivery status; checked again later',
      );
      return 'error';
    }
    const outcome = deliveryOutcome(upstream, this.clock.now());
    const changed = await this.store.recordDelivery(
      reward.upstream_reward_id,
      [reward.connection_id],
      outcome,
    );
    // Final upstream but not applied (a newer state is recorded): nothing more to learn by polling.
    if (!changed && outcome.state !== 'pending')
      await this.store.stopDeliveryCheck(reward.dispatch_id, reward.position);
    return outcome.state;
  }
}
