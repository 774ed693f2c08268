import { Injectable } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { DispatchConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { DispatchSender } from './dispatch.sender';
import { DispatchStore, REWARD_PAGE } from './dispatch.store';
import type { DispatchRow } from './dispatch.view';
import { type Claimed, InFlightCounts, LoopWorker } from '../common/claim-loop';
import { rootSpan } from '../common/tracing';

const BATCH = 20;
/** Dispatches one instance works on at once from the worker. */
const MAX_IN_FLIGHT = 64;
/** Per connection and instance: interactive dispatches at once (bulk: one — a batch is sent one slice at a time). */
const INTERACTIVE_PER_CONNECTION = 2;

/**
 * Sends queued dispatches and batches, and reclaims those stuck in `sending` past their lease (their process died).
 * Every instance runs one; SKIP LOCKED hands each due dispatch to one of them; the dispatch row is the job. A batch is
 * worked one slice (REWARD_PAGE rewards) per claim, then queued again, so one tenant's batch never holds the workers
 * from the others (fairness of the claim: DispatchStore.claimDue; the account's pace: AccountPacer).
 */
@Injectable()
export class DispatchWorker extends LoopWorker {
  /** Connection id → dispatches in flight here, per priority. */
  private readonly busy = [new InFlightCounts(), new InFlightCounts()];

  constructor(
    @InjectConfig('dispatch') config: DispatchConfig,
    private readonly store: DispatchStore,
    private readonly sender: DispatchSender,
    scheduler: SchedulerRegistry,
  ) {
    super(scheduler, 'reward-dispatch-worker', config.pollMs, 'dispatch worker', MAX_IN_FLIGHT);
  }

  /** One claim: at most one dispatch per account; again while any was claimed (the next accounts' turn). */
  protected async claim(free: number): Promise<Claimed> {
    const claimed = await this.store.claimDue(
      Math.min(BATCH, free),
      this.busyWith(0, INTERACTIVE_PER_CONNECTION),
      this.busyWith(1, 1),
    );
    for (const row of claimed) this.start(row);
    return { started: claimed.length, more: claimed.length > 0 };
  }

  private start(row: DispatchRow): void {
    const release = this.busy[row.priority].hold(row.connection_id ?? '');
    const attempt = rootSpan(
      'dispatch.worker_attempt',
      () =>
        this.store
          .openRewards(row.id, -1, REWARD_PAGE)
          .then((slice) => this.sender.run(row, slice, { more: slice.length === REWARD_PAGE })),
      {
        'dispatch.id': row.id,
        'tenant.id': row.tenant_id,
        'dispatch.priority': row.priority === 1 ? 'bulk' : 'interactive',
      },
    );
    this.track(attempt, `dispatch ${row.id}`, () => {
      release();
      if (!this.isStopped) this.nudge(); // a slice ended or a slot freed: the next due work goes now
    });
  }

  private busyWith(priority: 0 | 1, limit: number): string[] {
    return this.busy[priority].keysAtLeast(limit).filter((id) => id !== '');
  }
}
