import { Body, Controller, Delete, Get, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ConnectionsService } from './connections.service';
import {
  ConnectSessionResponse,
  ConnectionQueryDto,
  ConnectionResponse,
  CreateConnectSessionDto,
} from './dto/connection.dto';

@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenant')
export class ConnectionsController {
  constructor(private readonly connections: ConnectionsService) {}

  @Post('connect-sessions')
  @ApiOperation({
    summary: 'Create a one-time connect link for the tenant admin’s "Connect rewards account" button.',
  })
  @ApiCreatedResponse({ type: ConnectSessionResponse })
  createSession(
    @Param('tenant') tenant: string,
    @Body() dto: CreateConnectSessionDto,
  ): Promise<ConnectSessionResponse> {
    return this.connections.createSession(tenant, dto);
  }

  @Get('connection')
  @ApiOperation({
    summary: 'The tenant’s connection: status, scopes, refresh and error state (never tokens).',
  })
  @ApiOkResponse({ type: ConnectionResponse })
  get(@Param('tenant') tenant: string, @Query() query: ConnectionQueryDto): Promise<ConnectionResponse> {
    return this.connections.getConnection(tenant, query.environment);
  }

  @Delete('connection')
  @ApiOperation({ summary: 'Disconnect: the grant is deleted and the connection marked disconnected.' })
  @ApiOkResponse({ type: ConnectionResponse })
  disconnect(
    @Param('tenant') tenant: string,
    @Query() query: ConnectionQueryDto,
  ): Promise<ConnectionResponse> {
    return this.connections.disconnect(tenant, query.environment);
  }
}
