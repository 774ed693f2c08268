import { Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Query } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiProperty,
  ApiTags,
} from '@nestjs/swagger';
import {
  ApiErrors,
  CONNECTION_NOT_ACTIVE,
  CONNECTION_NOT_FOUND,
  ENVIRONMENT_NOT_CONFIGURED,
  FIELDS_UNAVAILABLE,
  OPERATOR_ROUTE,
  TENANT_ROUTE,
  VAULT_UNAVAILABLE,
  notAUuid,
  validationFailed,
} from '../common/api-docs';
import { ConnectionsService } from '../connections/connections.service';
import { ConnectionQueryDto } from '../connections/dto/connection.dto';
import { OperatorOnly, RequiresScope } from '../tenants/auth/auth.decorators';
import { FieldView, FieldsCacheService } from './fields-cache.service';

class FieldsResponse {
  @ApiProperty({ enum: ['sandbox', 'production'] }) environment: string;
  @ApiProperty({ type: [FieldView] }) fields: FieldView[];
  @ApiProperty({ format: 'date-time' }) fetched_at: string;
  @ApiProperty({
    description: 'True when the rewards service could not be reached and an older copy is served.',
  })
  stale: boolean;
}

@ApiTags('fields')
@ApiBearerAuth()
@Controller()
export class FieldsCacheController {
  constructor(
    private readonly fields: FieldsCacheService,
    private readonly connections: ConnectionsService,
  ) {}

  @Get('v1/tenants/:tenant/fields')
  @RequiresScope('rewards:send', 'rewards:read')
  @ApiOperation({
    summary: 'The custom fields of the tenant’s rewards account (cached), with options and required flags.',
  })
  @ApiOkResponse({ type: FieldsResponse })
  @ApiErrors(
    TENANT_ROUTE,
    validationFailed('environment', 'environment must be one of the following values: sandbox, production'),
    CONNECTION_NOT_FOUND,
    CONNECTION_NOT_ACTIVE,
    ENVIRONMENT_NOT_CONFIGURED,
    FIELDS_UNAVAILABLE,
    VAULT_UNAVAILABLE,
  )
  async list(@Param('tenant') tenant: string, @Query() query: ConnectionQueryDto): Promise<FieldsResponse> {
    const connection = await this.connections.liveConnection(tenant, query.environment);
    const snapshot = await this.fields.get(connection.id);
    return {
      environment: connection.environment,
      fields: snapshot.fields,
      fetched_at: snapshot.fetchedAt.toISOString(),
      stale: snapshot.stale,
    };
  }

  @Delete('v1/ops/connections/:id/fields-cache')
  @OperatorOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Purge a connection’s cached fields (operator); the next use reloads them.' })
  @ApiNoContentResponse()
  @ApiErrors(OPERATOR_ROUTE, notAUuid('DELETE', '/v1/ops/connections/123/fields-cache'))
  purge(@Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string): Promise<void> {
    return this.fields.purge(id);
  }
}
