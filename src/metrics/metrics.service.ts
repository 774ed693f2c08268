import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The gateway's Prometheus metrics, one registry per app instance. No tenant or connection ids in labels: bounded
 * cardinality, and nothing a scrape could leak.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly refreshes = this.counter(
    'rg_token_refreshes_total',
    'Token refresh attempts by outcome (success, invalid_grant, transient, lock_timeout).',
    ['outcome'],
  );
  readonly refreshBackoffs = this.counter(
    'rg_token_refresh_backoff_rejections_total',
    'Callers answered connection_refresh_backoff instead of another token call.',
  );
  readonly lockWait = this.histogram(
    'rg_refresh_lock_wait_seconds',
    'Time to acquire the grant row lock before a refresh.',
    [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  );
  readonly upstreamLatency = this.histogram(
    'rg_upstream_request_duration_seconds',
    'Requests to the rewards service by route and status (status "error" for timeouts and network errors).',
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
    ['route', 'status'],
  );
  readonly pacingWait = this.histogram(
    'rg_pacing_wait_seconds',
    'Time a request to the rewards service waited for its account slot (per-account pacing), by priority.',
    [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ['priority'],
  );
  readonly pacingRetakes = this.counter(
    'rg_pacing_retakes_total',
    'Slots asked again: "deferred" (bulk work, the next slot was further out than one spacing) or "late" (woke up too late to use the slot without bunching).',
    ['reason'],
  );
  readonly insertBatch = this.histogram(
    'rg_dispatch_insert_batch_size',
    'Dispatches inserted per statement (group commit: requests arriving while a commit is in flight share the next).',
    [1, 2, 4, 8, 16, 32, 64],
  );
  readonly upstreamThrottled = this.counter(
    'rg_upstream_throttled_total',
    '429 answers the rewards service gave despite pacing (each slowed the account down and was retried).',
  );
  readonly fieldsCache = this.counter(
    'rg_fields_cache_events_total',
    'Fields cache hits (memory), misses and forced reloads.',
    ['event'],
  );
  readonly dispatchAttempts = this.counter(
    'rg_dispatch_attempts_total',
    'Per reward: upstream order attempts by outcome (sent, pending_approval, queued, failed) and approval checks that settled (approved, rejected).',
    ['outcome'],
  );
  readonly deliveryWebhooks = this.counter(
    'rg_delivery_webhooks_total',
    'Delivery webhooks received from the rewards service by outcome (applied, duplicate, ignored, bad_signature).',
    ['outcome'],
  );
  readonly deliveryReconciliations = this.counter(
    'rg_delivery_reconciliations_total',
    'Delivery reconciliation polls (GET /rewards/{id}) by outcome (delivered, delivery_failed, pending, not_found, connection_gone, error).',
    ['outcome'],
  );
  readonly webhookRegistrations = this.counter(
    'rg_webhook_registrations_total',
    'Registrations of the delivery webhook with the rewards service by outcome (registered, failed, abandoned).',
    ['outcome'],
  );
  readonly webhookDeliveries = this.counter(
    'rg_webhook_deliveries_total',
    'Tenant webhook delivery attempts by outcome (delivered, http_error, timeout, network_error, forbidden_target) and events given up (gave_up).',
    ['outcome'],
  );
  readonly webhookEndpointsDisabled = this.counter(
    'rg_webhook_endpoints_disabled_total',
    'Tenant webhook endpoints disabled after failing continuously for WEBHOOK_DISABLE_AFTER_MS.',
  );

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'rg_' });
  }

  /**
   * A gauge read at scrape time from memory: `read` is synchronous on purpose, so a scrape never waits on I/O; values
   * that need a query come from a snapshot refreshed in the background (see `OpsMetricsService`).
   */
  gauge(
    name: string,
    help: string,
    labelNames: string[],
    read: (set: (labels: Record<string, string>, value: number) => void) => undefined,
  ): Gauge {
    return new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        read((labels, value) => this.set(labels, value));
      },
    });
  }

  private counter(name: string, help: string, labelNames: string[] = []): Counter {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  private histogram(name: string, help: string, buckets: number[], labelNames: string[] = []): Histogram {
    return new Histogram({ name, help, buckets, labelNames, registers: [this.registry] });
  }
}
