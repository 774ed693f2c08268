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
  OPERATOR_KEY_REQUIRED,
  OPERATOR_ROUTE,
  TENANT_ROUTE,
  notAUuid,
  validationFailed,
} from '../common/api-docs';
import { OperatorOnly } from './auth/auth.decorators';
import { ApiKeysService } from './api-keys.service';
import { TenantsService } from './tenants.service';
import {
  ApiKeyResponse,
  CreateApiKeyDto,
  CreateTenantDto,
  CreatedApiKeyResponse,
  TenantResponse,
  UpdateTenantDto,
} from './dto/tenant.dto';

const RETURN_URL = 'https://platform.example.com/settings/rewards';

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
    {
      status: 409,
      code: 'tenant_exists',
      message: 'A tenant with id "acme" already exists.',
      details: [{ field: 'id', reason: 'already taken' }],
      when: 'the id is taken',
    },
  )
  create(@Body() dto: CreateTenantDto): Promise<TenantResponse> {
    return this.tenants.create(dto);
  }

  @Get(':tenant')
  @ApiOperation({ summary: 'Read a tenant (its own key or an operator key).' })
  @ApiOkResponse({ type: TenantResponse })
  @ApiErrors(TENANT_ROUTE)
  get(@Param('tenant') tenant: string): Promise<TenantResponse> {
    return this.tenants.get(tenant);
  }

  @Patch(':tenant')
  @OperatorOnly()
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
  @ApiErrors(
    TENANT_ROUTE,
    OPERATOR_KEY_REQUIRED,
    JSON_BODY,
    validationFailed('return_urls', 'each return_urls entry must be an absolute http(s) URL'),
  )
  update(@Param('tenant') tenant: string, @Body() dto: UpdateTenantDto): Promise<TenantResponse> {
    return this.tenants.update(tenant, dto);
  }

  @Post(':tenant/api-keys')
  @OperatorOnly()
  @ApiOperation({
    summary: 'Create an API key for the tenant; the plaintext key is returned once (operator key).',
  })
  @ApiCreatedResponse({ type: CreatedApiKeyResponse })
  @ApiJsonBody(CreateApiKeyDto, {
    service: { summary: 'A key for one internal service', value: { name: 'payments-service' } },
  })
  @ApiErrors(
    TENANT_ROUTE,
    OPERATOR_KEY_REQUIRED,
    JSON_BODY,
    validationFailed('name', 'name must be a string'),
  )
  async createKey(
    @Param('tenant') tenant: string,
    @Body() dto: CreateApiKeyDto,
  ): Promise<CreatedApiKeyResponse> {
    await this.tenants.require(tenant);
    return this.apiKeys.create(tenant, dto.name);
  }

  @Get(':tenant/api-keys')
  @ApiOperation({ summary: 'List the tenant’s API keys (metadata only, never the keys).' })
  @ApiOkResponse({ type: [ApiKeyResponse] })
  @ApiErrors(TENANT_ROUTE)
  async listKeys(@Param('tenant') tenant: string): Promise<ApiKeyResponse[]> {
    await this.tenants.require(tenant);
    return this.apiKeys.list(tenant);
  }

  @Delete(':tenant/api-keys/:keyId')
  @OperatorOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke an API key (operator key).' })
  @ApiNoContentResponse()
  @ApiErrors(
    TENANT_ROUTE,
    OPERATOR_KEY_REQUIRED,
    {
      status: 404,
      code: 'api_key_not_found',
      message: 'No active API key 3f2b8c1e-5d4a-4e7b-9c0d-2a1b3c4d5e6f for this tenant.',
      when: 'no such active key for this tenant',
    },
    notAUuid('DELETE', '/v1/tenants/acme/api-keys/123'),
  )
  async revokeKey(
    @Param('tenant') tenant: string,
    @Param('keyId', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) keyId: string,
  ): Promise<void> {
    await this.tenants.require(tenant);
    await this.apiKeys.revoke(tenant, keyId);
  }
}
