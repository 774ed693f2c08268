import { isIP } from 'node:net';
import { Injectable } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import type { TenantWebhooksConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { type Claimed, InFlightCounts, LoopWorker } from '../common/claim-loop';
import { Clock } from '../common/clock';
import { rootSpan } from '../common/tracing';
import { trace } from '@opentelemetry/api';
import { MetricsService } from '../metrics/metrics.service';
import { retryDelayMs } from './webhook-events';
import { hostOf, isForbiddenTargetError, pinnedLookup, resolveChecked } from './target-guard';
import { type ClaimedDelivery, WebhookStore } from './webhook.store';

/** Deliveries in flight per endpoint on one instance. */
const PER_ENDPOINT_IN_FLIGHT = 4;
/** Delivered and failed rows are kept this long (the deliveries view), then purged. */
export const OUTBOX_KEPT_DAYS = 30;
const GAUGE_EVERY_MS = 15_000;
const UNDECRYPTABLE = 'the signing secret cannot be decrypted with VAULT_KEYS; not sent';
/** The most of a receiver's answer that is read (and then ignored). */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** `kind`, for metrics: `http_error` is any non-2xx, 3xx included. */
type FailureKind = 'http_error' | 'timeout' | 'network_error' | 'forbidden_target';
type AttemptOutcome =
  | { ok: true; statusCode: number }
  | { ok: false; statusCode: number | null; kind: FailureKind; error: string };

const failed = (kind: FailureKind, error: string, statusCode: number | null = null): AttemptOutcome => ({
  ok: false,
  statusCode,
  kind,
  error,
});

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
  private readonly agent: Agent;

  constructor(
    @InjectConfig('webhooks') private readonly config: TenantWebhooksConfig,
    private readonly store: WebhookStore,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
    scheduler: SchedulerRegistry,
  ) {
    super(scheduler, 'tenant-webhooks-worker', config.pollMs, 'webhook worker', config.concurrency);
    this.agent = new Agent({
      connect: { timeout: config.timeoutMs, lookup: pinnedLookup(() => config.allowPrivateTargets) as never },
      headersTimeout: config.timeoutMs,
      bodyTimeout: config.timeoutMs,
      keepAliveTimeout: 4_000,
      connections: 8,
    });
    metrics.gauge(
      'rg_webhook_outbox_pending',
      'Tenant webhook events waiting for delivery (every endpoint; refreshed every 15 s by each instance).',
      [],
      (set) => {
        set({}, this.depth);
      },
    );
  }

  /** The agent closes while the loop stops: deliveries under way end at once instead of holding shutdown. */
  override async onModuleDestroy(): Promise<void> {
    await Promise.all([super.onModuleDestroy(), this.agent.destroy().catch(() => undefined)]);
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
    const outcome = secret
      ? await this.send(row, secret, new Date(this.clock.now()))
      : failed('network_error', UNDECRYPTABLE);
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

  /**
   * One delivery attempt: a signed POST (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`) of
   * `{type, timestamp, data}`. The connection goes only to addresses checked by the SSRF guard after DNS resolution
   * (the lookup is pinned to them); an IP literal is checked before connecting. No redirect is followed (a 3xx is a
   * failure); the whole attempt is bounded by `WEBHOOK_TIMEOUT_MS`; at most 64 KiB of the answer is read, and ignored.
   */
  private async send(row: ClaimedDelivery, secret: string, now: Date): Promise<AttemptOutcome> {
    const { type, timestamp, data } = row.payload;
    const body = JSON.stringify({ type, timestamp, data });
    const signature = new Webhook(secret).sign(row.id, now, body);
    try {
      const target = new URL(row.url);
      // IP literals never reach a lookup: check them here (names are checked in the pinned lookup).
      const host = hostOf(target);
      if (isIP(host)) await resolveChecked(host, this.config.allowPrivateTargets);
      const res = await request(target, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'RewardsGateway-Webhooks/1',
          'webhook-id': row.id,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body,
        signal: AbortSignal.timeout(this.config.timeoutMs),
      });
      await drain(res.body);
      const status = res.statusCode;
      if (status >= 200 && status < 300) return { ok: true, statusCode: status };
      const redirect = status >= 300 && status < 400 ? ' (a redirect; redirects are not followed)' : '';
      return failed('http_error', `receiver answered ${status}${redirect}`, status);
    } catch (error) {
      if (isForbiddenTargetError(error)) return failed('forbidden_target', messageOf(error));
      const { name, code } = (error ?? {}) as { name?: string; code?: string };
      if (
        name === 'TimeoutError' ||
        name === 'AbortError' ||
        /TIMEOUT/i.test(code ?? '') ||
        /timeout/i.test(messageOf(error))
      ) {
        return failed('timeout', `no answer within ${this.config.timeoutMs} ms`);
      }
      return failed('network_error', messageOf(error));
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

/** Reads at most MAX_RESPONSE_BYTES of the answer and drops the rest (the connection is then not reused). */
async function drain(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<void> {
  let read = 0;
  for await (const chunk of body) {
    read += chunk.length;
    if (read > MAX_RESPONSE_BYTES) {
      body.destroy();
      return;
    }
  }
}

function messageOf(error: unknown): string {
  const e = error as { message?: string; code?: string; cause?: { message?: string; code?: string } };
  const own = e?.message || String(error);
  const cause = e?.cause?.message && e.cause.message !== own ? `: ${e.cause.message}` : '';
  return `${e?.code && !own.includes(e.code) ? `${e.code} ` : ''}${own}${cause}`.slice(0, 500);
}
