import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Patch, Post } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
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
  create(@Body() dto: CreateTenantDto): Promise<TenantResponse> {
    return this.tenants.create(dto);
  }

  @Get(':tenant')
  @ApiOperation({ summary: 'Read a tenant (its own key or an operator key).' })
  @ApiOkResponse({ type: TenantResponse })
  get(@Param('tenant') tenant: string): Promise<TenantResponse> {
    return this.tenants.get(tenant);
  }

  @Patch(':tenant')
  @OperatorOnly()
  @ApiOperation({
    summary: 'Change a tenant’s name, return URL allow-list or default funding source (operator key).',
  })
  @ApiOkResponse({ type: TenantResponse })
  update(@Param('tenant') tenant: string, @Body() dto: UpdateTenantDto): Promise<TenantResponse> {
    return this.tenants.update(tenant, dto);
  }

  @Post(':tenant/api-keys')
  @OperatorOnly()
  @ApiOperation({
    summary: 'Create an API key for the tenant; the plaintext key is returned once (operator key).',
  })
  @ApiCreatedResponse({ type: CreatedApiKeyResponse })
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
  async listKeys(@Param('tenant') tenant: string): Promise<ApiKeyResponse[]> {
    await this.tenants.require(tenant);
    return this.apiKeys.list(tenant);
  }

  @Delete(':tenant/api-keys/:keyId')
  @OperatorOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke an API key (operator key).' })
  @ApiNoContentResponse()
  async revokeKey(
    @Param('tenant') tenant: string,
    @Param('keyId', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) keyId: string,
  ): Promise<void> {
    await this.tenants.require(tenant);
    await this.apiKeys.revoke(tenant, keyId);
  }
}
