import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors, TENANT_ROUTE, validationFailed } from '../common/api-docs';
import { INVALID_CURSOR } from '../common/page-query.dto';
import { RequiresScope } from '../tenants/auth/auth.decorators';
import { ACTIVITY_OUTCOMES, ActivityStore } from './activity.store';
import { ActivityListResponse, ActivityQueryDto } from './dto/activity.dto';

/** The tenant's connection activity: every request the gateway made to the rewards service for its connection. */
@ApiTags('connections')
@ApiBearerAuth()
@Controller('v1/tenants/:tenant/connection')
export class ActivityController {
  constructor(private readonly activity: ActivityStore) {}

  @Get('activity')
  @RequiresScope('rewards:read', 'connection:manage')
  @ApiOperation({
    summary:
      'Every request made to the rewards service for the tenant’s connection, newest first (key with rewards:read or connection:manage).',
    description:
      'What, when, the status, latency, pacing wait, attempt, the 429s absorbed, the outcome and our error code, and ' +
      'the dispatch and reward it served — never a token, URL, body or recipient data. Written in batches: a request ' +
      'shows up within about a second. Page with `cursor`: pass the `next_cursor` of each answer until it is null.',
  })
  @ApiOkResponse({ type: ActivityListResponse })
  @ApiErrors(
    TENANT_ROUTE,
    validationFailed('dispatch_id', 'dispatch_id must be a dispatch id (a UUID)'),
    validationFailed(
      'outcome',
      `outcome must be one of the following values: ${ACTIVITY_OUTCOMES.join(', ')}`,
    ),
    INVALID_CURSOR,
  )
  list(@Param('tenant') tenant: string, @Query() query: ActivityQueryDto): Promise<ActivityListResponse> {
    return this.activity.page({ ...query, tenantId: tenant });
  }
}
