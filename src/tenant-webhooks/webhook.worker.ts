import { Injectable, Logger } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { TenantWebhooksConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { type Claimed, ClaimLoop, InFlightCounts, LoopWorker } from '../common/claim-loop';
import { Clock } from '../common/clock';
import { rootSpan } from '../common/tracing';
import { trace } from '@opentelemetry/api';
import { MetricsService } from '../metrics/metrics.service';
import { Vault, WEBHOOK_SECRET } from '../token-vault/vault.service';
import { retryDelayMs } from './webhook-events';
import { bodyOf, WebhookSender } from './webhook.sender';
import { type ClaimedDelivery, WebhookStore } from './webhook.store';

/** Deliveries in flight per endpoint on one instance. */
export const PER_ENDPOINT_IN_FLIGHT = 4;
/** Delivered and failed rows are kept this long (the deliveries view), then purged. */
export const OUTBOX_KEPT_DAYS = 30;
const GAUGE_EVERY_MS = 15_000;

/**
 * Delivers the outbox. Every instance runs one: it claims due rows with `FOR UPDATE SKIP LOCKED` (one instance each),
 * as a lease — a row whose sender died is due again once the lease ends — and sends them with bounded concurrency
 * (`WEBHOOK_CONCURRENCY` per instance, at most 4 per endpoint). Failures are retried on the schedule
 * (`WEBHOOK_RETRY_SCHEDULE_MS`) until `WEBHOOK_GIVE_UP_AFTER_MS`; an endpoint failing continuously for
 * `WEBHOOK_DISABLE_AFTER_MS` is disabled. Delivery is at least once (receivers deduplicate on `webhook-id`), and the
 * order of deliveries to an endpoint is not guaranteed.
 */
@Injectable()
export class WebhookWorker extends LoopWorker {
  private readonly logger = new Logger(WebhookWorker.name);
  protected readonly loop: ClaimLoop;
  /** Endpoint id → deliveries in flight here. */
  private readonly busy = new InFlightCounts();
  /** Decrypted secrets by endpoint, keyed by their ciphertext (a rotated or replaced secret is read again). */
  private readonly secrets = new Map<string, { enc: string; secret: string }>();
  private depth = 0;
  private lastGauge = 0;

  constructor(
    @InjectConfig('webhooks') private readonly config: TenantWebhooksConfig,
    private readonly vault: Vault,
    private readonly store: WebhookStore,
    private readonly sender: WebhookSender,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
    scheduler: SchedulerRegistry,
  ) {
    super(scheduler, 'tenant-webhooks-worker', config.pollMs);
    this.loop = new ClaimLoop(
      this.logger,
      'webhook worker',
      config.concurrency,
      (free) => this.claim(free),
      () => this.gauge(),
    );
    metrics.gauge(
      'rg_webhook_outbox_pending',
      'Tenant webhook events waiting for delivery (every endpoint; refreshed every 15 s by each instance).',
      [],
      (set) => {
        set({}, this.depth);
        return undefined;
      },
    );
  }

  private async claim(free: number): Promise<Claimed> {
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
    this.loop.track(delivery, `webhook delivery ${row.id}`, release);
  }

  private async deliver(row: ClaimedDelivery): Promise<void> {
    let secret: string;
    try {
      secret = this.secretOf(row);
    } catch (error) {
      // VAULT_KEYS lost the key of this secret: nothing can be signed. Logged; retried like a failed attempt.
      this.logger.error(`webhook endpoint ${row.endpoint_id}: ${(error as Error).message}`);
      secret = '';
    }
    const outcome = secret
      ? await this.sender.send(row.url, row.id, secret, bodyOf(row.payload), new Date(this.clock.now()))
      : ({
          ok: false,
          statusCode: null,
          kind: 'network_error',
          error: 'the signing secret cannot be decrypted with VAULT_KEYS; not sent',
        } as const);
    // The delivery's trace says how it went (never the URL, the body or the secret).
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
    const webhooks = this.config;
    const result = await this.store.recordFailure(
      row,
      { statusCode: outcome.statusCode, error: outcome.error },
      {
        delayMs: retryDelayMs(webhooks.retryScheduleMs, row.attempts),
        giveUpAfterMs: webhooks.giveUpAfterMs,
        disableAfterMs: webhooks.disableAfterMs,
      },
    );
    if (result.gaveUp) this.metrics.webhookDeliveries.inc({ outcome: 'gave_up' });
    if (result.disabled) {
      this.metrics.webhookEndpointsDisabled.inc();
      this.logger.warn(
        { tenantId: row.tenant_id, endpointId: row.endpoint_id, lastError: outcome.error },
        'tenant webhook endpoint disabled after failing continuously',
      );
    }
  }

  private secretOf(row: ClaimedDelivery): string {
    const cached = this.secrets.get(row.endpoint_id);
    if (cached && cached.enc === row.secret_enc) return cached.secret;
    const secret = this.vault.open(WEBHOOK_SECRET, row.endpoint_id, row.secret_enc);
    if (this.secrets.size > 10_000) this.secrets.clear();
    this.secrets.set(row.endpoint_id, { enc: row.secret_enc, secret });
    return secret;
  }

  private async gauge(): Promise<void> {
    const now = this.clock.now();
    if (now - this.lastGauge >= GAUGE_EVERY_MS) {
      this.lastGauge = now;
      this.depth = await this.store.pendingCount();
    }
  }
}
