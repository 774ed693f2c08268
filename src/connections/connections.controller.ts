import { Body, Controller, Delete, Get, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import {
  ApiErrors,
  ApiJsonBody,
  CONNECTION_NOT_FOUND,
  ENVIRONMENT_NOT_CONFIGURED,
  JSON_BODY,
  TENANT_ROUTE,
  validationFailed,
} from '../common/api-docs';
import { ConnectionsService } from './connections.service';
import { RequiresScope } from '../tenants/auth/auth.decorators';
import {
  ConnectSessionResponse,
  ConnectionQueryDto,
  ConnectionResponse,
  CreateConnectSessionDto,
} from './dto/connection.dto';

const ENVIRONMENT_QUERY = validationFailed(
  'environment',
  'environment must be one of the following values: sandbox, production',
);

@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenant')
export class ConnectionsController {
  constructor(private readonly connections: ConnectionsService) {}

  @Post('connect-sessions')
  @RequiresScope('connection:manage')
  @ApiOperation({
    summary: 'Create a one-time connect link for the tenant admin’s "Connect rewards account" button.',
  })
  @ApiCreatedResponse({ type: ConnectSessionResponse })
  @ApiJsonBody(CreateConnectSessionDto, {
    returnUrl: {
      summary: 'Back to the platform’s settings page (on the tenant’s return_urls)',
      value: { return_url: 'https://platform.example.com/settings/rewards' },
    },
    explicit: {
      summary: 'Environment and scopes named',
      value: {
        environment: 'sandbox',
        scopes: ['default'],
        return_url: 'https://platform.example.com/settings/rewards',
      },
    },
  })
  @ApiErrors(
    TENANT_ROUTE,
    JSON_BODY,
    validationFailed('scopes', 'each scope must be default or team_management'),
    ENVIRONMENT_NOT_CONFIGURED,
    {
      status: 422,
      code: 'return_url_not_allowed',
      message: 'return_url is not on the tenant’s allow-list (return_urls).',
      details: [{ field: 'return_url', reason: 'allowed: https://platform.example.com/settings/rewards' }],
      when: 'a return_url off the tenant’s return_urls',
    },
  )
  createSession(
    @Param('tenant') tenant: string,
    @Body() dto: CreateConnectSessionDto,
  ): Promise<ConnectSessionResponse> {
    return this.connections.createSession(tenant, dto);
  }

  @Get('connection')
  @RequiresScope('connection:manage')
  @ApiOperation({
    summary: 'The tenant’s connection: status, scopes, refresh and error state (never tokens).',
  })
  @ApiOkResponse({ type: ConnectionResponse })
  @ApiErrors(TENANT_ROUTE, ENVIRONMENT_QUERY, CONNECTION_NOT_FOUND, ENVIRONMENT_NOT_CONFIGURED)
  get(@Param('tenant') tenant: string, @Query() query: ConnectionQueryDto): Promise<ConnectionResponse> {
    return this.connections.getConnection(tenant, query.environment);
  }

  @Delete('connection')
  @RequiresScope('connection:manage')
  @ApiOperation({ summary: 'Disconnect: the grant is deleted and the connection marked disconnected.' })
  @ApiOkResponse({ type: ConnectionResponse })
  @ApiErrors(TENANT_ROUTE, ENVIRONMENT_QUERY, CONNECTION_NOT_FOUND, ENVIRONMENT_NOT_CONFIGURED)
  disconnect(
    @Param('tenant') tenant: string,
    @Query() query: ConnectionQueryDto,
  ): Promise<ConnectionResponse> {
    return this.connections.disconnect(tenant, query.environment);
  }
}
