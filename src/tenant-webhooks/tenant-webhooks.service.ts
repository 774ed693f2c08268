import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpStatus, Injectable } from '@nestjs/common';
import { AuditLog } from '../audit/audit-log.service';
import { ValidationFailedError } from '../common/app-error';
import type { TenantWebhooksConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { TenantWebhookError } from './tenant-webhooks.errors';
import type { CreateWebhookDto } from './dto/webhook.dto';
import { hostOf, isForbiddenTargetError, resolveChecked } from './target-guard';
import { ALL_EVENTS, MAX_ENDPOINTS_PER_TENANT, SECRET_PREFIX, WEBHOOK_EVENT_TYPES } from './webhook-events';
import {
  type DeliveryRow,
  type DeliveryStatus,
  type EndpointRow,
  type FailingEndpoint,
  WebhookStore,
} from './webhook.store';
import { WebhookWorker } from './webhook.worker';

/** How long registration waits for DNS before accepting the URL (delivery checks it again anyway). */
const REGISTRATION_DNS_TIMEOUT_MS = 2_000;

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

function toView(row: EndpointRow) {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    status: row.disabled_at ? 'disabled' : row.failing_since ? 'failing' : 'active',
    created_at: iso(row.created_at) as string,
    consecutive_failures: row.consecutive_failures,
    failing_since: iso(row.failing_since),
    last_success_at: iso(row.last_success_at),
    last_failure_at: iso(row.last_failure_at),
    last_error: row.last_error,
    disabled_at: iso(row.disabled_at),
    disabled_reason: row.disabled_reason,
  };
}

function toDeliveryView(row: DeliveryRow) {
  return {
    id: row.id,
    type: row.event_type,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    last_attempt_at: iso(row.last_attempt_at),
    delivered_at: iso(row.delivered_at),
    created_at: iso(row.created_at) as string,
  };
}

/** Tenant webhook endpoints (the signing secret shown once, stored sealed by the vault) and their deliveries. */
@Injectable()
export class TenantWebhooksService {
  constructor(
    @InjectConfig('webhooks') private readonly config: TenantWebhooksConfig,
    private readonly store: WebhookStore,
    private readonly worker: WebhookWorker,
    private readonly audit: AuditLog,
  ) {}

  async create(tenantId: string, dto: CreateWebhookDto) {
    await this.checkTarget(dto.url);
    const id = randomUUID();
    const secret = `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
    const events = dto.events.includes(ALL_EVENTS)
      ? [ALL_EVENTS]
      : WEBHOOK_EVENT_TYPES.filter((e) => dto.events.includes(e));
    const row = await this.store.insertEndpoint(
      { id, tenant_id: tenantId, url: dto.url, events, secret },
      MAX_ENDPOINTS_PER_TENANT,
    );
    if (!row) {
      throw new TenantWebhookError(
        HttpStatus.CONFLICT,
        'webhook_endpoint_limit_reached',
        `A tenant may register at most ${MAX_ENDPOINTS_PER_TENANT} webhook endpoints; delete one first.`,
      );
    }
    // After the store's own transaction committed. The host only: a URL's query may carry the receiver's secret.
    await this.audit.recordCommitted('webhook_endpoint.created', {
      tenantId,
      target: { type: 'webhook_endpoint', id: row.id },
      details: { host: new URL(row.url).host, events: row.events },
    });
    return {
      id: row.id,
      url: row.url,
      events: row.events,
      secret,
      created_at: iso(row.created_at) as string,
    };
  }

  async list(tenantId: string) {
    return { webhooks: (await this.store.listEndpoints(tenantId)).map(toView) };
  }

  async get(tenantId: string, id: string) {
    return toView(await this.require(tenantId, id));
  }

  async remove(tenantId: string, id: string): Promise<void> {
    if (!(await this.store.deleteEndpoint(tenantId, id))) throw notFound(id);
    await this.audit.recordCommitted('webhook_endpoint.deleted', {
      tenantId,
      target: { type: 'webhook_endpoint', id },
    });
  }

  async enable(tenantId: string, id: string) {
    const row = await this.store.enableEndpoint(tenantId, id);
    if (!row) throw notFound(id);
    await this.audit.recordCommitted('webhook_endpoint.enabled', {
      tenantId,
      target: { type: 'webhook_endpoint', id },
    });
    return toView(row);
  }

  async deliveries(tenantId: string, id: string, limit = 50, status?: DeliveryStatus) {
    await this.require(tenantId, id);
    return { deliveries: (await this.store.listDeliveries(id, limit, status)).map(toDeliveryView) };
  }

  async replay(tenantId: string, id: string, eventId: string) {
    const endpoint = await this.require(tenantId, id);
    if (endpoint.disabled_at) {
      throw new TenantWebhookError(
        HttpStatus.CONFLICT,
        'webhook_endpoint_disabled',
        'The endpoint is disabled; enable it first (POST …/webhooks/{id}/enable).',
      );
    }
    const row = await this.store.replay(id, eventId);
    if (!row) {
      throw new TenantWebhookError(
        HttpStatus.NOT_FOUND,
        'webhook_delivery_not_found',
        `The endpoint has no event ${JSON.stringify(eventId)} (delivered and failed events are kept 30 days).`,
      );
    }
    await this.audit.recordCommitted('webhook_event.replayed', {
      tenantId,
      target: { type: 'webhook_event', id: eventId },
      details: { endpoint_id: id, type: row.event_type },
    });
    this.worker.nudge();
    return toDeliveryView(row);
  }

  async failingEndpoints(limit = 50): Promise<FailingEndpoint[]> {
    return this.store.failingEndpoints(limit);
  }

  private async require(tenantId: string, id: string): Promise<EndpointRow> {
    const row = await this.store.findEndpoint(tenantId, id);
    if (!row) throw notFound(id);
    return row;
  }

  /**
   * The SSRF rule at registration: an internal address (an IP literal, `localhost`, or a name resolving to one) is
   * refused, naming `url`. A name that does not resolve now is accepted: every delivery resolves and checks again.
   */
  private async checkTarget(url: string): Promise<void> {
    if (this.config.allowPrivateTargets) return;
    try {
      // An unref'd timer: it never holds the process, and settles a race already won.
      const timeout = sleep(REGISTRATION_DNS_TIMEOUT_MS, undefined, { ref: false });
      await Promise.race([resolveChecked(hostOf(new URL(url)), false), timeout]);
    } catch (error) {
      if (!isForbiddenTargetError(error)) return; // a DNS failure: accepted (checked again at each delivery)
      throw new ValidationFailedError([
        {
          field: 'url',
          reason:
            'url must not point at a loopback, private, link-local, CGNAT, multicast or unspecified address ' +
            `(${error.message})`,
        },
      ]);
    }
  }
}

function notFound(id: string): TenantWebhookError {
  return new TenantWebhookError(
    HttpStatus.NOT_FOUND,
    'webhook_endpoint_not_found',
    `No webhook endpoint ${JSON.stringify(id)} for this tenant.`,
  );
}
