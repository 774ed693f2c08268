import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The gateway's Prometheus metrics (prom-client), one registry per app instance. No tenant or connection ids in
 * labels: bounded cardinality, and nothing a scrape could leak.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  readonly refreshes = new Counter({
    name: 'rg_token_refreshes_total',
    help: 'Token refresh attempts by outcome (success, invalid_grant, transient, lock_timeout).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly refreshBackoffs = new Counter({
    name: 'rg_token_refresh_backoff_rejections_total',
    help: 'Callers answered connection_refresh_backoff instead of another token call.',
    registers: [this.registry],
  });

  readonly lockWait = new Histogram({
    name: 'rg_refresh_lock_wait_seconds',
    help: 'Time to acquire the grant row lock before a refresh.',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  readonly upstreamLatency = new Histogram({
    name: 'rg_upstream_request_duration_seconds',
    help: 'Requests to the rewards service by route and status (status "error" for timeouts and network errors).',
    labelNames: ['route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
    registers: [this.registry],
  });

  readonly pacingWait = new Histogram({
    name: 'rg_pacing_wait_seconds',
    help: 'Time a request to the rewards service waited for its account slot (per-account pacing), by priority.',
    labelNames: ['priority'],
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly pacingRetakes = new Counter({
    name: 'rg_pacing_retakes_total',
    help: 'Slots asked again: "deferred" (bulk work, the next slot was further out than one spacing) or "late" (woke up too late to use the slot without bunching).',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  readonly insertBatch = new Histogram({
    name: 'rg_dispatch_insert_batch_size',
    help: 'Dispatches inserted per statement (group commit: requests arriving while a commit is in flight share the next).',
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers: [this.registry],
  });

  readonly upstreamThrottled = new Counter({
    name: 'rg_upstream_throttled_total',
    help: '429 answers the rewards service gave despite pacing (each slowed the account down and was retried).',
    registers: [this.registry],
  });

  readonly fieldsCache = new Counter({
    name: 'rg_fields_cache_events_total',
    help: 'Fields cache hits (memory), misses and forced reloads.',
    labelNames: ['event'],
    registers: [this.registry],
  });

  readonly dispatchAttempts = new Counter({
    name: 'rg_dispatch_attempts_total',
    help: 'Per reward: upstream order attempts by outcome (sent, pending_approval, queued, failed) and approval checks that settled (approved, rejected).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly deliveryWebhooks = new Counter({
    name: 'rg_delivery_webhooks_total',
    help: 'Delivery webhooks received from the rewards service by outcome (applied, duplicate, ignored, bad_signature).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly deliveryReconciliations = new Counter({
    name: 'rg_delivery_reconciliations_total',
    help: 'Delivery reconciliation polls (GET /rewards/{id}) by outcome (delivered, delivery_failed, pending, not_found, connection_gone, error).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly webhookRegistrations = new Counter({
    name: 'rg_webhook_registrations_total',
    help: 'Registrations of the delivery webhook with the rewards service by outcome (registered, failed, abandoned).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly webhookDeliveries = new Counter({
    name: 'rg_webhook_deliveries_total',
    help: 'Tenant webhook delivery attempts by outcome (delivered, http_error, timeout, network_error, forbidden_target) and events given up (gave_up).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly webhookEndpointsDisabled = new Counter({
    name: 'rg_webhook_endpoints_disabled_total',
    help: 'Tenant webhook endpoints disabled after failing continuously for WEBHOOK_DISABLE_AFTER_MS.',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'rg_' });
  }

  /**
   * A gauge whose values are read at scrape time from memory. `read` is synchronous on purpose: a scrape never waits
   * on I/O and costs no query; values that need one come from a snapshot refreshed in the background (see
   * `OpsMetricsService`).
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
}
