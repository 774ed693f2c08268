import { Body, Controller, Get, Headers, Param, ParseUUIDPipe, Post, Query, Req, Res } from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBearerAuth,
  ApiCreatedResponse,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { DispatchListResponse, DispatchResponse, RewardListResponse } from './dto/dispatch.response';
import { ListDispatchesDto, SendRewardsDto } from './dto/send-rewards.dto';
import { RewardDispatchService } from './reward-dispatch.service';
import { RewardListingService } from './reward-listing.service';

@ApiTags('rewards')
@ApiBearerAuth()
@Controller('v1/tenants/:tenant')
export class RewardDispatchController {
  constructor(
    private readonly dispatches: RewardDispatchService,
    private readonly listing: RewardListingService,
  ) {}

  @Post('rewards')
  @ApiOperation({
    summary:
      'Send one or more rewards, exactly once per Idempotency-Key (one upstream order per reward in the single shape).',
    description:
      '201: sent, or partially_failed (see each reward). 202: queued (the rewards service was unavailable; poll the dispatch) or ' +
      'pending_approval (held upstream). When every reward failed: 422 (refused), 409 (connection not active) or 503 (gave up). A repeated request ' +
      'with the same key and body replays the stored outcome; another body → 422 idempotency_key_reused; while the first ' +
      'is in flight → 409 idempotency_request_in_progress.',
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: true,
    description: 'Unique per reward request, at most 255 characters; kept at least 24 h.',
  })
  @ApiCreatedResponse({
    type: DispatchResponse,
    description:
      'The dispatch, status sent or partially_failed, every reward with its upstream order and reward ids.',
  })
  @ApiAcceptedResponse({
    type: DispatchResponse,
    description:
      'The dispatch, status queued (a worker retries it) or pending_approval (reconciled in the background).',
  })
  async send(
    @Param('tenant') tenant: string,
    @Headers('idempotency-key') key: string | undefined,
    @Body() dto: SendRewardsDto,
    @Req() req: Request,
    @Res({ passthrough: true }) res: Response,
  ): Promise<unknown> {
    const outcome = await this.dispatches.send(tenant, key, dto, req.body);
    res.status(outcome.status);
    if (outcome.replayed) res.setHeader('Idempotent-Replayed', 'true');
    for (const [name, value] of Object.entries(outcome.headers ?? {})) res.setHeader(name, value);
    return outcome.body;
  }

  @Get('rewards')
  @ApiOperation({
    summary: 'List rewards, filtered by custom field labels: `?Department=Sales&offset=0&limit=50`.',
  })
  @ApiQuery({ name: 'environment', required: false, enum: ['sandbox', 'production'] })
  @ApiQuery({ name: 'offset', required: false })
  @ApiQuery({ name: 'limit', required: false })
  @ApiOkResponse({ type: RewardListResponse })
  listRewards(@Param('tenant') tenant: string, @Query() query: Record<string, unknown>): Promise<unknown> {
    return this.listing.list(tenant, query);
  }

  @Get('dispatches/:id')
  @ApiOperation({ summary: 'A dispatch: status, attempts, upstream order and reward ids, last error.' })
  @ApiOkResponse({ type: DispatchResponse })
  get(
    @Param('tenant') tenant: string,
    @Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string,
  ): Promise<unknown> {
    return this.dispatches.get(tenant, id);
  }

  @Get('dispatches')
  @ApiOperation({ summary: 'The tenant’s dispatches, newest first, optionally by status.' })
  @ApiOkResponse({ type: DispatchListResponse })
  list(@Param('tenant') tenant: string, @Query() query: ListDispatchesDto): Promise<unknown> {
    return this.dispatches.list(tenant, query.status, query.limit, query.offset);
  }
}
