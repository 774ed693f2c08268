import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBearerAuth,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import {
  CreatedWebhookResponse,
  CreateWebhookDto,
  DeliveryListResponse,
  DeliveryResponse,
  ListDeliveriesDto,
  WebhookListResponse,
  WebhookResponse,
} from './dto/webhook.dto';
import { RequiresScope } from '../tenants/auth/auth.decorators';
import { AuditLog } from '../audit/audit-log.service';
import { ValidationFailedError } from '../common/app-error';
import type { TenantWebhooksConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import {
  deliveryNotFound,
  endpointDisabled,
  endpointLimitReached,
  endpointNotFound,
} from './tenant-webhooks.errors';
import { hostOf, isForbiddenTargetError, resolveChecked } from './target-guard';
import { ALL_EVENTS, SECRET_PREFIX, WEBHOOK_EVENT_TYPES } from './webhook-events';
import { WebhookStore } from './webhook.store';
import { WebhookWorker } from './webhook.worker';
import {
  ApiErrors,
  ApiJsonBody,
  JSON_BODY,
  TENANT_ROUTE,
  WEBHOOK_ENDPOINT_NOT_FOUND,
  example,
  notAUuid,
  validationFailed,
} from '../common/api-docs';

const uuid = () => new ParseUUIDPipe({ errorHttpStatusCode: 404 });
/** How long registration waits for DNS before accepting the URL (delivery checks it again anyway). */
const REGISTRATION_DNS_TIMEOUT_MS = 2_000;

/**
 * Tenant webhook endpoints (the signing secret shown once, stored sealed by the vault) and their deliveries. The
 * global API-key guard scopes every route to the tenant in the path.
 */
@ApiTags('webhooks')
@ApiBearerAuth()
@RequiresScope('webhooks:manage')
@Controller('v1/tenants/:tenant/webhooks')
export class TenantWebhooksController {
  constructor(
    @InjectConfig('webhooks') private readonly config: TenantWebhooksConfig,
    private readonly store: WebhookStore,
    private readonly worker: WebhookWorker,
    private readonly audit: AuditLog,
  ) {}

  @Post()
  @ApiOperation({
    summary: 'Register a webhook endpoint; its signing secret is returned once (tenant or operator key).',
    description:
      'Events: dispatch.completed, reward.sent, reward.delivered, reward.delivery_failed, connection.needs_reauth, ' +
      'connection.recovered (or ["*"]). Signed as Standard Webhooks (webhook-id, webhook-timestamp, ' +
      'webhook-signature). At most 10 endpoints per tenant; loopback, private, link-local, CGNAT and multicast targets ' +
      'are refused (400 naming url).',
  })
  @ApiCreatedResponse({ type: CreatedWebhookResponse })
  @ApiJsonBody(CreateWebhookDto, {
    rewards: {
      summary: 'Reward events to the platform’s receiver',
      value: {
        url: 'https://platform.example.com/hooks/rewards',
        events: ['reward.sent', 'reward.delivered'],
      },
    },
    everything: {
      summary: 'Every event type',
      value: { url: 'https://platform.example.com/hooks/all', events: ['*'] },
    },
  })
  @ApiErrors(
    TENANT_ROUTE,
    JSON_BODY,
    validationFailed('url', 'url must be an absolute https (or http) URL without credentials or fragment'),
    validationFailed(
      'url',
      'url must not point at a loopback, private, link-local, CGNAT, multicast or unspecified address ' +
        '(the target 10.0.0.5 is a loopback, private, link-local or otherwise internal address; refused)',
    ),
    example(endpointLimitReached(), 'the tenant has 10 endpoints already (disabled ones count)'),
  )
  async create(
    @Param('tenant') tenantId: string,
    @Body() dto: CreateWebhookDto,
  ): Promise<CreatedWebhookResponse> {
    await this.checkTarget(dto.url);
    const secret = `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
    const events = dto.events.includes(ALL_EVENTS)
      ? [ALL_EVENTS]
      : WEBHOOK_EVENT_TYPES.filter((e) => dto.events.includes(e));
    const row = await this.store.insertEndpoint(tenantId, dto.url, events, secret);
    if (!row) throw endpointLimitReached();
    // After the store's own transaction committed. The host only: a URL's query may carry the receiver's secret.
    await this.audit.recordCommitted('webhook_endpoint.created', {
      tenantId,
      target: { type: 'webhook_endpoint', id: row.id },
      details: { host: new URL(row.url).host, events: row.events },
    });
    return { id: row.id, url: row.url, events: row.events, secret, created_at: row.created_at };
  }

  @Get()
  @ApiOperation({ summary: 'The tenant’s webhook endpoints and their delivery health (never the secrets).' })
  @ApiOkResponse({ type: WebhookListResponse })
  @ApiErrors(TENANT_ROUTE)
  async list(@Param('tenant') tenantId: string): Promise<WebhookListResponse> {
    return { webhooks: await this.store.endpoints(tenantId) };
  }

  @Get(':id')
  @ApiOperation({ summary: 'One endpoint: events, failures, and whether (and why) it was disabled.' })
  @ApiOkResponse({ type: WebhookResponse })
  @ApiErrors(TENANT_ROUTE, WEBHOOK_ENDPOINT_NOT_FOUND, notAUuid('GET', '/v1/tenants/acme/webhooks/123'))
  get(@Param('tenant') tenantId: string, @Param('id', uuid()) id: string): Promise<WebhookResponse> {
    return this.require(tenantId, id);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete an endpoint; its pending events are not delivered.' })
  @ApiNoContentResponse()
  @ApiErrors(TENANT_ROUTE, WEBHOOK_ENDPOINT_NOT_FOUND, notAUuid('DELETE', '/v1/tenants/acme/webhooks/123'))
  async remove(@Param('tenant') tenantId: string, @Param('id', uuid()) id: string): Promise<void> {
    if (!(await this.store.deleteEndpoint(tenantId, id))) throw endpointNotFound(id);
    await this.audit.recordCommitted('webhook_endpoint.deleted', {
      tenantId,
      target: { type: 'webhook_endpoint', id },
    });
  }

  @Post(':id/enable')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Enable a disabled endpoint again (its failure record cleared); replay what it missed.',
  })
  @ApiOkResponse({ type: WebhookResponse })
  @ApiErrors(
    TENANT_ROUTE,
    WEBHOOK_ENDPOINT_NOT_FOUND,
    notAUuid('POST', '/v1/tenants/acme/webhooks/123/enable'),
  )
  async enable(@Param('tenant') tenantId: string, @Param('id', uuid()) id: string): Promise<WebhookResponse> {
    const row = await this.store.enableEndpoint(tenantId, id);
    if (!row) throw endpointNotFound(id);
    await this.audit.recordCommitted('webhook_endpoint.enabled', {
      tenantId,
      target: { type: 'webhook_endpoint', id },
    });
    return row;
  }

  @Get(':id/deliveries')
  @ApiOperation({
    summary:
      'The endpoint’s recent events, newest first: id (= webhook-id), type, status, attempts, last answer.',
  })
  @ApiOkResponse({ type: DeliveryListResponse })
  @ApiErrors(
    TENANT_ROUTE,
    validationFailed('status', 'status must be one of the following values: pending, delivered, failed'),
    WEBHOOK_ENDPOINT_NOT_FOUND,
    notAUuid('GET', '/v1/tenants/acme/webhooks/123/deliveries'),
  )
  async deliveries(
    @Param('tenant') tenantId: string,
    @Param('id', uuid()) id: string,
    @Query() query: ListDeliveriesDto,
  ): Promise<DeliveryListResponse> {
    await this.require(tenantId, id);
    return { deliveries: await this.store.listDeliveries(id, query.limit ?? 50, query.status) };
  }

  @Post(':id/deliveries/:eventId/replay')
  @HttpCode(202)
  @ApiOperation({ summary: 'Queue one event again, due now, with the same webhook-id.' })
  @ApiAcceptedResponse({ type: DeliveryResponse })
  @ApiErrors(
    TENANT_ROUTE,
    WEBHOOK_ENDPOINT_NOT_FOUND,
    example(deliveryNotFound('3f2b8c1e-5d4a-4e7b-9c0d-2a1b3c4d5e6f'), 'the endpoint has no such event'),
    notAUuid('POST', '/v1/tenants/acme/webhooks/123/deliveries/456/replay'),
    example(endpointDisabled(), 'the endpoint is disabled'),
  )
  async replay(
    @Param('tenant') tenantId: string,
    @Param('id', uuid()) id: string,
    @Param('eventId', uuid()) eventId: string,
  ): Promise<DeliveryResponse> {
    const endpoint = await this.require(tenantId, id);
    if (endpoint.disabled_at) throw endpointDisabled();
    const row = await this.store.replay(id, eventId);
    if (!row) throw deliveryNotFound(eventId);
    await this.audit.recordCommitted('webhook_event.replayed', {
      tenantId,
      target: { type: 'webhook_event', id: eventId },
      details: { endpoint_id: id, type: row.type },
    });
    this.worker.nudge();
    return row;
  }

  private async require(tenantId: string, id: string): Promise<WebhookResponse> {
    const [row] = await this.store.endpoints(tenantId, id);
    if (!row) throw endpointNotFound(id);
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
