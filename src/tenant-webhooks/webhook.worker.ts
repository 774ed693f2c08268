import { Injectable } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { TenantWebhooksConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { type Claimed, InFlightCounts, LoopWorker } from '../common/claim-loop';
import { Clock } from '../common/clock';
import { rootSpan } from '../common/tracing';
import { trace } from '@opentelemetry/api';
import { MetricsService } from '../metrics/metrics.service';
import { retryDelayMs } from './webhook-events';
import { type AttemptOutcome, bodyOf, WebhookSender } from './webhook.sender';
import { type ClaimedDelivery, WebhookStore } from './webhook.store';

/** Deliveries in flight per endpoint on one instance. */
export const PER_ENDPOINT_IN_FLIGHT = 4;
/** Delivered and failed rows are kept this long (the deliveries view), then purged. */
export const OUTBOX_KEPT_DAYS = 30;
const GAUGE_EVERY_MS = 15_000;
const UNDECRYPTABLE = 'the signing secret cannot be decrypted with VAULT_KEYS; not sent';

/**
 * Delivers the outbox on every instance: claims due rows (SKIP LOCKED) as a lease — a row whose sender died is due
 * again once the lease ends — and sends them with bounded concurrency. At least once (receivers deduplicate on
 * `webhook-id`), in no guaranteed order.
 */
@Injectable()
export class WebhookWorker extends LoopWorker {
  /** Endpoint id → deliveries in flight here. */
  private readonly busy = new InFlightCounts();
  /** Decrypted secrets by endpoint, keyed by their ciphertext (a rotated or replaced secret is read again). */
  private readonly secrets = new Map<string, { enc: string; secret: string }>();
  private depth = 0;
  private lastGauge = 0;

  constructor(
    @InjectConfig('webhooks') private readonly config: TenantWebhooksConfig,
    private readonly store: WebhookStore,
    private readonly sender: WebhookSender,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
    scheduler: SchedulerRegistry,
  ) {
    super(scheduler, 'tenant-webhooks-worker', config.pollMs, 'webhook worker', config.concurrency);
    metrics.gauge(
      'rg_webhook_outbox_pending',
      'Tenant webhook events waiting for delivery (every endpoint; refreshed every 15 s by each instance).',
      [],
      (set) => {
        set({}, this.depth);
      },
    );
  }

  protected async claim(free: number): Promise<Claimed> {
    const claimed = await this.store.claimDue(
      free,
      this.busy,
      PER_ENDPOINT_IN_FLIGHT,
      // The lease: a row held by a dead process is due again once it ends (WEBHOOK_LEASE_MARGIN_MS past the timeout).
      this.config.timeoutMs + this.config.leaseMarginMs,
    );
    for (const row of claimed) this.start(row);
    return { started: claimed.length, more: claimed.length === free };
  }

  private start(row: ClaimedDelivery): void {
    const release = this.busy.hold(row.endpoint_id);
    const delivery = rootSpan('webhook.delivery', () => this.deliver(row), {
      'tenant.id': row.tenant_id,
      'webhook.endpoint_id': row.endpoint_id,
      'webhook.delivery_id': String(row.id),
    });
    this.track(delivery, `webhook delivery ${row.id}`, release);
  }

  private async deliver(row: ClaimedDelivery): Promise<void> {
    const secret = this.secretOf(row);
    const outcome: AttemptOutcome = secret
      ? await this.sender.send(row.url, row.id, secret, bodyOf(row.payload), new Date(this.clock.now()))
      : { ok: false, statusCode: null, kind: 'network_error', error: UNDECRYPTABLE };
    // Never the URL, the body or the secret in the trace.
    trace.getActiveSpan()?.setAttributes({
      'webhook.outcome': outcome.ok ? 'delivered' : outcome.kind,
      'http.response.status_code': outcome.statusCode ?? undefined,
    });
    if (outcome.ok) {
      await this.store.recordSuccess(row, outcome.statusCode);
      this.metrics.webhookDeliveries.inc({ outcome: 'delivered' });
      return;
    }
    this.metrics.webhookDeliveries.inc({ outcome: outcome.kind });
    const { retryScheduleMs, giveUpAfterMs, disableAfterMs } = this.config;
    const result = await this.store.recordFailure(row, outcome, {
      delayMs: retryDelayMs(retryScheduleMs, row.attempts),
      giveUpAfterMs,
      disableAfterMs,
    });
    if (result.gaveUp) this.metrics.webhookDeliveries.inc({ outcome: 'gave_up' });
    if (result.disabled) {
      this.metrics.webhookEndpointsDisabled.inc();
      this.logger.warn(
        { tenantId: row.tenant_id, endpointId: row.endpoint_id, lastError: outcome.error },
        'tenant webhook endpoint disabled after failing continuously',
      );
    }
  }

  /** Null when VAULT_KEYS lost the secret's key: nothing can be signed; retried like a failed attempt. */
  private secretOf(row: ClaimedDelivery): string | null {
    const cached = this.secrets.get(row.endpoint_id);
    if (cached && cached.enc === row.secret_enc) return cached.secret;
    let secret: string;
    try {
      secret = this.store.openSecret(row);
    } catch (error) {
      this.logger.error(`webhook endpoint ${row.endpoint_id}: ${(error as Error).message}`);
      return null;
    }
    if (this.secrets.size > 10_000) this.secrets.clear();
    this.secrets.set(row.endpoint_id, { enc: row.secret_enc, secret });
    return secret;
  }

  /** The outbox depth for the gauge, read after a pass at most every 15 s. */
  protected override async afterPass(): Promise<void> {
    const now = this.clock.now();
    if (now - this.lastGauge >= GAUGE_EVERY_MS) {
      this.lastGauge = now;
      this.depth = await this.store.pendingCount();
    }
  }
}
