import {
  type BeforeApplicationShutdown,
  Injectable,
  Logger,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { Counter } from 'prom-client';
import { Clock } from '../common/clock';
import type { ActivityConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';
import { CallRecorder, type UpstreamExchange, type UpstreamOperation } from '../rewards-api/call-recorder';
import { RewardsApiError, mapUpstreamError } from '../rewards-api/rewards-api.errors';
import { ACTIVITY_BUFFER, ActivityBuffer } from './activity-buffer';
import { type ActivityOutcome, type ActivityRecord, ActivityStore } from './activity.store';
import { currentlyServed } from '../common/request-context';

/** Anything but a connection id (a grant not stored yet) is not recorded. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Answer = { status: number | null; outcome: ActivityOutcome; errorCode: string | null };

export function classify(operation: UpstreamOperation, error: unknown): Answer {
  if (!(error instanceof RewardsApiError))
    return { status: null, outcome: 'unavailable', errorCode: 'upstream_unavailable' };
  const status = error.status;
  if (operation === 'token_refresh') {
    // The vault's codes, as a caller waiting on the token gets them.
    if (error.kind === 'invalid_client')
      return { status, outcome: 'rejected', errorCode: 'upstream_app_credentials_invalid' };
    if (error.kind === 'invalid_grant' || error.kind === 'rejected')
      return { status, outcome: 'rejected', errorCode: 'connection_not_active' };
    return {
      status,
      outcome: status === 429 ? 'throttled' : 'unavailable',
      errorCode: 'connection_refresh_failed',
    };
  }
  // A 401 is retried with a new token: no error of its own.
  if (error.kind === 'unauthorized') return { status, outcome: 'unauthorized', errorCode: null };
  const outcome: ActivityOutcome =
    status === 429 ? 'throttled' : error.kind === 'transient' ? 'unavailable' : 'rejected';
  return { status, outcome, errorCode: mapUpstreamError(error).code };
}

/**
 * Records every request made for a connection into a bounded buffer written in batches, never on the caller's path.
 * Shutdown writes what is left; a crash loses at most the last interval's records.
 */
@Injectable()
export class ActivityRecorder
  extends CallRecorder
  implements BeforeApplicationShutdown, OnApplicationShutdown
{
  private readonly logger = new Logger(ActivityRecorder.name);
  private readonly buffer: ActivityBuffer<ActivityRecord>;
  private readonly droppedTotal: Counter<'reason'>;
  private readonly writtenTotal: Counter;
  private lastWarned = 0;

  constructor(
    @InjectConfig('activity') private readonly config: ActivityConfig,
    private readonly clock: Clock,
    store: ActivityStore,
    metrics: MetricsService,
  ) {
    super();
    this.droppedTotal = new Counter({
      name: 'rg_connection_activity_dropped_total',
      help: 'Connection activity records dropped: the buffer was full (buffer_full), their batch could not be written (write_failed), or they came after shutdown (closed).',
      labelNames: ['reason'],
      registers: [metrics.registry],
    });
    this.writtenTotal = new Counter({
      name: 'rg_connection_activity_written_total',
      help: 'Connection activity records written.',
      registers: [metrics.registry],
    });
    this.buffer = new ActivityBuffer<ActivityRecord>(
      ACTIVITY_BUFFER,
      clock,
      async (rows) => {
        this.writtenTotal.inc(await store.insertBatch(rows));
      },
      (count, reason, error) => this.dropped(count, reason, error),
    );
  }

  async exchange<R>(what: UpstreamExchange, send: () => Promise<R>): Promise<R> {
    if (!this.config.enabled || !UUID.test(what.connectionId)) return send();
    const at = this.clock.now();
    const started = performance.now();
    try {
      const result = await send();
      const status = (result as { status?: unknown } | null)?.status;
      this.add(what, at, started, {
        status: typeof status === 'number' ? status : 200,
        outcome: 'success',
        errorCode: null,
      });
      return result;
    } catch (error) {
      this.add(what, at, started, classify(what.operation, error));
      throw error;
    }
  }

  get pending(): number {
    return this.buffer.size;
  }

  /** Writes what waits now (tests, and shutdown). */
  flush(): Promise<void> {
    return this.buffer.flush();
  }

  /** Shutdown, after the workers stopped: written while the database is surely open. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.buffer.flush();
  }

  /** Then what came while the server closed, if the pools are still open; nothing after. */
  async onApplicationShutdown(): Promise<void> {
    await this.buffer.close();
  }

  private add(what: UpstreamExchange, at: number, started: number, answer: Answer): void {
    const served = currentlyServed();
    this.buffer.add({
      created_at: new Date(at),
      connection_id: what.connectionId,
      operation: what.operation,
      attempt: what.attempt,
      http_status: answer.status,
      outcome: answer.outcome,
      error_code: answer.errorCode,
      latency_ms: performance.now() - started,
      pacing_wait_ms: what.pacingWaitMs,
      throttled_429: what.throttled,
      dispatch_id: served?.dispatchId ?? null,
      reward_position: served?.rewardPosition ?? null,
    });
  }

  private dropped(count: number, reason: string, error?: unknown): void {
    this.droppedTotal.inc({ reason }, count);
    const now = this.clock.now();
    if (now - this.lastWarned < 60_000) return; // the counter has the numbers
    this.lastWarned = now;
    this.logger.warn(
      { reason, count, err: error instanceof Error ? error.message : undefined },
      'connection activity records dropped',
    );
  }
}
