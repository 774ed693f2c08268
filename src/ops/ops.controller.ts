import { Controller, Get, Param, ParseUUIDPipe, Post, Query, Res, applyDecorators } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiProduces,
  ApiPropertyOptional,
  ApiTags,
} from '@nestjs/swagger';
import {
  ConnectionHealthDetailResponse,
  ConnectionHealthListResponse,
} from './dto/connection-health.response';
import { IsIn, IsOptional, IsString, MaxLength } from 'class-validator';
import { INVALID_CURSOR, PageQueryDto } from '../common/page-query.dto';
import type { FastifyReply } from 'fastify';
import { OperatorOnly, Public } from '../tenants/auth/auth.decorators';
import { MetricsService } from '../metrics/metrics.service';
import { CONNECTION_HEALTHS, CONNECTION_STATUSES, OpsService } from './ops.service';
import { REWARDS_ENVIRONMENTS } from '../config/app-config';
import {
  ApiErrors,
  type ErrorExample,
  OPERATOR_ROUTE,
  OPS_CONNECTION_DISCONNECTED,
  OPS_CONNECTION_NOT_FOUND,
  notAUuid,
  validationFailed,
} from '../common/api-docs';

export class ConnectionListQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ enum: CONNECTION_STATUSES })
  @IsOptional()
  @IsIn(CONNECTION_STATUSES)
  status?: string;
  @ApiPropertyOptional({ enum: CONNECTION_HEALTHS }) @IsOptional() @IsIn(CONNECTION_HEALTHS) health?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() tenant?: string;
  @ApiPropertyOptional({ enum: REWARDS_ENVIRONMENTS })
  @IsOptional()
  @IsIn(REWARDS_ENVIRONMENTS)
  environment?: string;

  @ApiPropertyOptional({
    description:
      'The way to page: `next_cursor` of the previous page (with the same filters). Each page costs the same however deep it is; `offset` still works, costs the rows it skips, and cannot be combined with a cursor.',
  })
  @IsOptional()
  @IsString()
  @MaxLength(512)
  cursor?: string;
}

const uuid = new ParseUUIDPipe({ errorHttpStatusCode: 404 });

/** An operator route: the key it needs (`@ApiBearerAuth` on each, as `/metrics` is public) and its errors. */
const OperatorRoute = (...errors: ErrorExample[]) =>
  applyDecorators(ApiErrors(OPERATOR_ROUTE, ...errors), ApiBearerAuth(), OperatorOnly());

/** Check and Refresh: on a live connection, answered with its detail. */
const ConnectionAction = (action: 'check' | 'refresh', summary: string) =>
  applyDecorators(
    OperatorRoute(
      OPS_CONNECTION_NOT_FOUND,
      notAUuid('POST', `/v1/ops/connections/123/${action}`),
      OPS_CONNECTION_DISCONNECTED,
    ),
    ApiCreatedResponse({ type: ConnectionHealthDetailResponse }),
    ApiOperation({ summary }),
    Post(`v1/ops/connections/:id/${action}`),
  );

@ApiTags('ops')
@Controller()
export class OpsController {
  constructor(
    private readonly ops: OpsService,
    private readonly metrics: MetricsService,
  ) {}

  @Get('v1/ops/connections')
  @ApiOperation({
    summary:
      'Every connection’s health, most urgent first (needs_reauth, error, active; then most failures, latest error, tenant).',
    description: 'Page with `cursor`: pass the `next_cursor` of each answer until it is null.',
  })
  @ApiOkResponse({ type: ConnectionHealthListResponse })
  @OperatorRoute(
    validationFailed('health', 'health must be one of the following values: healthy, degraded, broken, idle'),
    INVALID_CURSOR,
  )
  list(@Query() query: ConnectionListQueryDto) {
    return this.ops.list(query);
  }

  @Get('v1/ops/connections/:id')
  @ApiOperation({ summary: 'One connection’s health with its last events.' })
  @ApiOkResponse({ type: ConnectionHealthDetailResponse })
  @OperatorRoute(OPS_CONNECTION_NOT_FOUND, notAUuid('GET', '/v1/ops/connections/123'))
  detail(@Param('id', uuid) id: string) {
    return this.ops.detail(id);
  }

  @ConnectionAction(
    'check',
    'Probe GET /api/v2/organizations with the connection’s token and record the outcome.',
  )
  check(@Param('id', uuid) id: string) {
    return this.ops.check(id);
  }

  @ConnectionAction('refresh', 'Force a token refresh through the refresh lock.')
  refresh(@Param('id', uuid) id: string) {
    return this.ops.refresh(id);
  }

  @Get('metrics')
  @Public()
  @ApiOperation({
    summary: 'Prometheus metrics (no tenant or connection ids in labels).',
    description: 'Public: no API key (no tenant data). Prometheus text exposition format.',
  })
  @ApiProduces('text/plain')
  @ApiOkResponse({
    description: 'The metrics, in the Prometheus text format.',
    schema: {
      type: 'string',
      example: '# TYPE rg_connections gauge\nrg_connections{status="active",health="healthy"} 1\n',
    },
  })
  async scrape(@Res() res: FastifyReply): Promise<void> {
    const metrics = await this.metrics.registry.metrics();
    void res.type(this.metrics.registry.contentType).send(metrics);
  }
}
