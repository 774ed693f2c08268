import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Patch, Post } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import {
  ApiErrors,
  ApiJsonBody,
  JSON_BODY,
  example,
  OPERATOR_ROUTE,
  TENANT_ROUTE,
  notAUuid,
  validationFailed,
} from '../common/api-docs';
import { ForOperators, OperatorOnly, RequiresScope } from './auth/auth.decorators';
import { API_KEY_SCOPES } from './auth/principal';
import { ApiKeysService, DEFAULT_ROTATION_GRACE_S } from './api-keys.service';
import { TenantsService } from './tenants.service';
import { apiKeyAlreadyRotated, apiKeyNotFound, tenantExists } from './tenants.errors';
import {
  ApiKeyResponse,
  CreateApiKeyDto,
  CreateTenantDto,
  CreatedApiKeyResponse,
  RotateApiKeyDto,
  RotatedApiKeyResponse,
  TenantResponse,
  UpdateTenantDto,
} from './dto/tenant.dto';

const RETURN_URL = 'https://platform.example.com/settings/rewards';
const KEY_ID = '3f2b8c1e-5d4a-4e7b-9c0d-2a1b3c4d5e6f';

/** The key id in the path; one that is not a UUID is answered like an unknown route. */
const KeyId = () => Param('keyId', new ParseUUIDPipe({ errorHttpStatusCode: 404 }));

@ApiTags('tenants')
@ApiBearerAuth()
@Controller('v1/tenants')
export class TenantsController {
  constructor(
    private readonly tenants: TenantsService,
    private readonly apiKeys: ApiKeysService,
  ) {}

  @Post()
  @OperatorOnly()
  @ApiOperation({ summary: 'Create a tenant (operator key).' })
  @ApiCreatedResponse({ type: TenantResponse })
  @ApiJsonBody(CreateTenantDto, {
    acme: {
      summary: 'A tenant with the URL its connect sessions return to',
      value: { id: 'acme', name: 'Acme Corp', return_urls: [RETURN_URL] },
    },
  })
  @ApiErrors(
    OPERATOR_ROUTE,
    JSON_BODY,
    validationFailed('id', 'id must be a slug: lowercase letters, digits and inner dashes, 1–63 characters'),
    example(tenantExists('acme'), 'the id is taken'),
  )
  create(@Body() dto: CreateTenantDto): Promise<TenantResponse> {
    return this.tenants.create(dto);
  }

  @Get(':tenant')
  @RequiresScope(...API_KEY_SCOPES)
  @ApiOperation({ summary: 'Read a tenant (its own key, with any scope, or an operator key).' })
  @ApiOkResponse({ type: TenantResponse })
  @ApiErrors(TENANT_ROUTE)
  get(@Param('tenant') tenant: string): Promise<TenantResponse> {
    return this.tenants.get(tenant);
  }

  @Patch(':tenant')
  @ApiOperation({
    summary: 'Change a tenant’s name, return URL allow-list or default funding source (operator key).',
  })
  @ApiOkResponse({ type: TenantResponse })
  @ApiJsonBody(UpdateTenantDto, {
    rename: {
      summary: 'New name, return URLs and default funding source',
      value: { name: 'Acme Corporation', return_urls: [RETURN_URL], default_funding_source_id: 'BALANCE' },
    },
  })
  @ForOperators(
    JSON_BODY,
    validationFailed('return_urls', 'each return_urls entry must be an absolute http(s) URL'),
  )
  update(@Param('tenant') tenant: string, @Body() dto: UpdateTenantDto): Promise<TenantResponse> {
    return this.tenants.update(tenant, dto);
  }

  @Delete(':tenant')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Delete a tenant (operator key): gone at once, its data removed in the background.',
    description:
      'In one transaction: the tenant is marked deleted (every route answers 404 tenant_not_found from then on, on ' +
      'every instance), its API keys are revoked and its connections disconnected (grants destroyed); audited as ' +
      '`tenant.deleted`. The retention job then removes its dispatches, rewards, events and the rest in bounded ' +
      'batches, the tenant row last. 202 with no body.',
  })
  @ForOperators()
  async remove(@Param('tenant') tenant: string): Promise<void> {
    await this.tenants.delete(tenant);
  }

  @Post(':tenant/api-keys')
  @ApiOperation({
    summary: 'Create an API key for the tenant; the plaintext key is returned once (operator key).',
  })
  @ApiCreatedResponse({ type: CreatedApiKeyResponse })
  @ApiJsonBody(CreateApiKeyDto, {
    service: {
      summary: 'A key for one internal service, with every scope',
      value: { name: 'payments-service' },
    },
    scoped: {
      summary: 'A key that may only send rewards and read them',
      value: { name: 'payroll-sender', scopes: ['rewards:send', 'rewards:read'] },
    },
  })
  @ForOperators(
    JSON_BODY,
    validationFailed('name', 'name must be a string'),
    validationFailed(
      'scopes',
      'unknown scope "rewards:write"; the scopes are rewards:send, rewards:read, connection:manage, webhooks:manage',
    ),
  )
  async createKey(
    @Param('tenant') tenant: string,
    @Body() dto: CreateApiKeyDto,
  ): Promise<CreatedApiKeyResponse> {
    await this.tenants.require(tenant);
    return this.apiKeys.create(tenant, dto.name, dto.scopes && [...new Set(dto.scopes)]);
  }

  @Post(':tenant/api-keys/:keyId/rotate')
  @ApiOperation({
    summary:
      'Rotate a key: a successor with the same name and scopes (its key returned once); the old key keeps working until `expires_at` (operator key).',
    description:
      'The old key works for `grace_period_seconds` more (default 24 h, at most 7 days; 0: it stops now), then answers ' +
      '401 invalid_api_key on every instance. A key is rotated once: rotate its successor next time.',
  })
  @ApiCreatedResponse({ type: RotatedApiKeyResponse })
  @ApiJsonBody(RotateApiKeyDto, {
    default: { summary: 'The old key keeps working 24 hours', value: {} },
    hour: { summary: 'The old key keeps working one more hour', value: { grace_period_seconds: 3600 } },
  })
  @ForOperators(
    JSON_BODY,
    validationFailed('grace_period_seconds', 'grace_period_seconds must not be greater than 604800'),
    example(apiKeyNotFound(KEY_ID), 'no such key for this tenant, or it is revoked or expired'),
    notAUuid('POST', '/v1/tenants/acme/api-keys/123/rotate'),
    example(
      apiKeyAlreadyRotated(KEY_ID, '9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d'),
      'the key has a successor already',
    ),
  )
  async rotateKey(
    @Param('tenant') tenant: string,
    @KeyId() keyId: string,
    @Body() dto: RotateApiKeyDto,
  ): Promise<RotatedApiKeyResponse> {
    return this.apiKeys.rotate(tenant, keyId, dto.grace_period_seconds ?? DEFAULT_ROTATION_GRACE_S);
  }

  @Get(':tenant/api-keys')
  @RequiresScope('connection:manage')
  @ApiOperation({
    summary:
      'List the tenant’s API keys with their scopes, last use and expiry (metadata only, never the keys or their hashes).',
  })
  @ApiOkResponse({ type: [ApiKeyResponse] })
  @ApiErrors(TENANT_ROUTE)
  async listKeys(@Param('tenant') tenant: string): Promise<ApiKeyResponse[]> {
    await this.tenants.require(tenant);
    return this.apiKeys.list(tenant);
  }

  @Delete(':tenant/api-keys/:keyId')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke an API key (operator key).' })
  @ApiNoContentResponse()
  @ForOperators(
    example(apiKeyNotFound(KEY_ID), 'no such active key for this tenant'),
    notAUuid('DELETE', '/v1/tenants/acme/api-keys/123'),
  )
  async revokeKey(@Param('tenant') tenant: string, @KeyId() keyId: string): Promise<void> {
    await this.tenants.require(tenant);
    await this.apiKeys.revoke(tenant, keyId);
  }
}
