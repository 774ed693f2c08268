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
import { TenantWebhooksService } from './tenant-webhooks.service';
import { RequiresScope } from '../tenants/auth/auth.decorators';
import {
  ApiErrors,
  ApiJsonBody,
  JSON_BODY,
  TENANT_ROUTE,
  WEBHOOK_ENDPOINT_NOT_FOUND,
  notAUuid,
  validationFailed,
} from '../common/api-docs';

const uuid = () => new ParseUUIDPipe({ errorHttpStatusCode: 404 });

/** Tenant webhook endpoints. The global API-key guard scopes every route to the tenant in the path. */
@ApiTags('webhooks')
@ApiBearerAuth()
@Controller('v1/tenants/:tenant/webhooks')
export class TenantWebhooksController {
  constructor(private readonly webhooks: TenantWebhooksService) {}

  @Post()
  @RequiresScope('webhooks:manage')
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
    {
      status: 409,
      code: 'webhook_endpoint_limit_reached',
      message: 'A tenant may register at most 10 webhook endpoints; delete one first.',
      when: 'the tenant has 10 endpoints already (disabled ones count)',
    },
  )
  create(@Param('tenant') tenant: string, @Body() dto: CreateWebhookDto): Promise<CreatedWebhookResponse> {
    return this.webhooks.create(tenant, dto);
  }

  @Get()
  @RequiresScope('webhooks:manage')
  @ApiOperation({ summary: 'The tenant’s webhook endpoints and their delivery health (never the secrets).' })
  @ApiOkResponse({ type: WebhookListResponse })
  @ApiErrors(TENANT_ROUTE)
  list(@Param('tenant') tenant: string): Promise<WebhookListResponse> {
    return this.webhooks.list(tenant);
  }

  @Get(':id')
  @RequiresScope('webhooks:manage')
  @ApiOperation({ summary: 'One endpoint: events, failures, and whether (and why) it was disabled.' })
  @ApiOkResponse({ type: WebhookResponse })
  @ApiErrors(TENANT_ROUTE, WEBHOOK_ENDPOINT_NOT_FOUND, notAUuid('GET', '/v1/tenants/acme/webhooks/123'))
  get(@Param('tenant') tenant: string, @Param('id', uuid()) id: string): Promise<WebhookResponse> {
    return this.webhooks.get(tenant, id);
  }

  @Delete(':id')
  @RequiresScope('webhooks:manage')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete an endpoint; its pending events are not delivered.' })
  @ApiNoContentResponse()
  @ApiErrors(TENANT_ROUTE, WEBHOOK_ENDPOINT_NOT_FOUND, notAUuid('DELETE', '/v1/tenants/acme/webhooks/123'))
  remove(@Param('tenant') tenant: string, @Param('id', uuid()) id: string): Promise<void> {
    return this.webhooks.remove(tenant, id);
  }

  @Post(':id/enable')
  @RequiresScope('webhooks:manage')
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
  enable(@Param('tenant') tenant: string, @Param('id', uuid()) id: string): Promise<WebhookResponse> {
    return this.webhooks.enable(tenant, id);
  }

  @Get(':id/deliveries')
  @RequiresScope('webhooks:manage')
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
  deliveries(
    @Param('tenant') tenant: string,
    @Param('id', uuid()) id: string,
    @Query() query: ListDeliveriesDto,
  ): Promise<DeliveryListResponse> {
    return this.webhooks.deliveries(tenant, id, query.limit ?? 50, query.status);
  }

  @Post(':id/deliveries/:eventId/replay')
  @RequiresScope('webhooks:manage')
  @HttpCode(202)
  @ApiOperation({ summary: 'Queue one event again, due now, with the same webhook-id.' })
  @ApiAcceptedResponse({ type: DeliveryResponse })
  @ApiErrors(
    TENANT_ROUTE,
    WEBHOOK_ENDPOINT_NOT_FOUND,
    {
      status: 404,
      code: 'webhook_delivery_not_found',
      message:
        'The endpoint has no event "3f2b8c1e-5d4a-4e7b-9c0d-2a1b3c4d5e6f" (delivered and failed events are kept 30 days).',
      when: 'the endpoint has no such event',
    },
    notAUuid('POST', '/v1/tenants/acme/webhooks/123/deliveries/456/replay'),
    {
      status: 409,
      code: 'webhook_endpoint_disabled',
      message: 'The endpoint is disabled; enable it first (POST …/webhooks/{id}/enable).',
      when: 'the endpoint is disabled',
    },
  )
  replay(
    @Param('tenant') tenant: string,
    @Param('id', uuid()) id: string,
    @Param('eventId', uuid()) eventId: string,
  ): Promise<DeliveryResponse> {
    return this.webhooks.replay(tenant, id, eventId);
  }
}
