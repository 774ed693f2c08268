import {
  Body,
  Controller,
  HttpStatus,
  Get,
  Headers,
  HttpCode,
  Param,
  ParseUUIDPipe,
  Post,
  Query,
  Req,
  Res,
} from '@nestjs/common';
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
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DispatchListResponse, DispatchResponse, RewardListResponse } from './dto/dispatch.response';
import { ListDispatchesDto } from './dto/list-dispatches.dto';
import {
  ERASE_RECIPIENT_BODY_SCHEMA,
  EraseBodyPipe,
  type EraseRecipientDto,
} from './dto/erase-recipient.dto';
import { SEND_REWARDS_BODY_SCHEMA, SendBodyPipe, type SendRewardsDto } from './dto/send-rewards.dto';
import { PageQueryDto } from '../common/page-query.dto';
import {
  ApiErrors,
  ApiJsonBody,
  CONNECTION_NOT_ACTIVE,
  CONNECTION_NOT_FOUND,
  CUSTOM_FIELD_ERRORS,
  DISPATCH_NOT_FOUND,
  ENVIRONMENT_NOT_CONFIGURED,
  FIELDS_UNAVAILABLE,
  type ErrorExample,
  TENANT_ROUTE,
  VAULT_UNAVAILABLE,
  example,
  jsonBodyErrors,
  notAUuid,
  validationFailed,
} from '../common/api-docs';
import { RewardDispatchService } from './reward-dispatch.service';
import { keyInProgress, keyInvalid, keyMissing, keyReused, notCancellable } from './reward-dispatch.errors';
import {
  type DispatchRow,
  type RewardError,
  type RewardRow,
  cancelledError,
  failureBody,
} from './dispatch.view';
import { RewardsApiError, mapUpstreamError, upstreamAppError } from '../rewards-api/rewards-api.errors';
import { RewardListingService } from './reward-listing.service';
import { RequiresScope } from '../tenants/auth/auth.decorators';
import { arrivedAtOf } from '../common/request-id';

const DISPATCH_ID = '3f2b8c1e-5d4a-4e7b-9c0d-2a1b3c4d5e6f';

/** `Prefer: respond-async` asks for a 202 at once, even for a few rewards. */
export function prefersRespondAsync(prefer: string | undefined): boolean {
  return /(^|[,;\s])respond-async([,;\s]|$)/i.test(prefer ?? '');
}

/** A send whose every reward failed (one reward here, refused as `error`), as the dispatch answers it. */
function allFailed(error: RewardError): ErrorExample {
  const row = { id: DISPATCH_ID, status: 'failed', reward_count: 1 } as DispatchRow;
  const reward = { position: 0, external_id: `${DISPATCH_ID}-r0`, status: 'failed', last_error: error };
  const { status, body } = failureBody(row, [reward as RewardRow]);
  return { status, ...body.error, when: `every reward failed: ${error.code}` } as ErrorExample;
}

/** A call to the rewards service that failed with `error`, as a reward's error (what the sender records). */
function refused(error: RewardsApiError): RewardError {
  const { code, message, upstreamStatus } = mapUpstreamError(error, 'the order');
  return { code, message, upstream_status: upstreamStatus };
}

/** A listing the rewards service refused (`error`), as the route answers it. */
const listingFailed = (error: RewardsApiError, when: string) =>
  example(upstreamAppError(error, 'the listing', HttpStatus.BAD_GATEWAY), when);

@ApiTags('rewards')
@ApiBearerAuth()
@Controller('v1/tenants/:tenant')
export class RewardDispatchController {
  constructor(
    private readonly dispatches: RewardDispatchService,
    private readonly listing: RewardListingService,
  ) {}

  @Post('rewards')
  @RequiresScope('rewards:send')
  @ApiOperation({
    summary:
      'Send one or more rewards (a batch of up to 10,000), exactly once per Idempotency-Key (one upstream order per reward in the single shape).',
    description:
      'Up to DISPATCH_INLINE_MAX_REWARDS rewards (default 10) are sent before the answer; a larger batch is validated ' +
      'whole, stored and answered 202 at once (Location: the dispatch), then sent at the account’s pace — poll the ' +
      'dispatch for `progress`, cancel it with `POST …/dispatches/{id}/cancel`. The same recipient twice is allowed ' +
      'and listed in `warnings`. ' +
      '201: sent, or partially_failed (see each reward). 202: queued (the rewards service was unavailable; poll the dispatch) or ' +
      'pending_approval (held upstream). When every reward failed: 422 (refused), 409 (connection not active) or 503 (gave up). A repeated request ' +
      'with the same key and body replays the stored outcome; another body → 422 idempotency_key_reused; while the first ' +
      'is in flight → 409 idempotency_request_in_progress.',
  })
  @ApiJsonBody(SEND_REWARDS_BODY_SCHEMA, {
    email: {
      summary: 'One gift card by e-mail, a custom field by its label',
      value: {
        rewards: [
          {
            recipient: { name: 'Ada Lovelace', email: 'ada@example.com' },
            value: { denomination: 25, currency_code: 'USD' },
            products: ['PRODAMAZONUS'],
            custom_fields: { Department: 'Sales' },
          },
        ],
      },
    },
    campaignLink: {
      summary:
        'A campaign reward as a redemption link; funding source, reference and custom fields by id and label',
      value: {
        environment: 'sandbox',
        funding_source_id: 'BALANCE',
        external_reference: 'payroll-2026-11',
        rewards: [
          {
            recipient: { name: 'Grace Hopper', email: 'grace@example.com' },
            value: { denomination: 50, currency_code: 'USD' },
            campaign_id: 'CAMPAIGNDEMO1',
            delivery: { method: 'LINK' },
            custom_fields: [
              { id: 'FLDDEPARTMENT', value: 'Engineering' },
              { label: 'Region', value: 'EMEA' },
            ],
          },
        ],
      },
    },
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: true,
    example: 'payroll-2026-11-ada',
    description:
      'Unique per reward request, at most 255 characters; kept at least 24 h. The same key with the same body replays the first answer.',
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
  @ApiHeader({
    name: 'Prefer',
    required: false,
    description:
      '`respond-async`: store the dispatch and answer 202 at once, even for a few rewards (a batch — more than ' +
      'DISPATCH_INLINE_MAX_REWARDS rewards — always is).',
  })
  @ApiErrors(
    TENANT_ROUTE,
    jsonBodyErrors(8),
    validationFailed('rewards[0].recipient.email', 'required for EMAIL delivery'),
    example(keyMissing(), 'no Idempotency-Key header'),
    example(
      keyInvalid('contains spaces or non-ASCII characters'),
      'an Idempotency-Key that is not 1–255 visible ASCII characters',
    ),
    CONNECTION_NOT_FOUND,
    CONNECTION_NOT_ACTIVE,
    example(keyInProgress(DISPATCH_ID), 'the first request with this key is still running'),
    allFailed(cancelledError('requested')),
    ENVIRONMENT_NOT_CONFIGURED,
    CUSTOM_FIELD_ERRORS,
    example(keyReused(DISPATCH_ID), 'the key was used with another body'),
    allFailed(refused(new RewardsApiError('rejected', 'Payment Required', 402))),
    allFailed(refused(new RewardsApiError('rejected', 'Product PRODAMAZONUS is not available in EUR', 400))),
    allFailed(refused(new RewardsApiError('transient', 'rewards service answered 503', 503))),
    VAULT_UNAVAILABLE.filter((e) => e.code === 'upstream_app_credentials_invalid'),
  )
  async send(
    @Param('tenant') tenant: string,
    @Headers('idempotency-key') key: string | undefined,
    @Headers('prefer') prefer: string | undefined,
    @Body(SendBodyPipe) dto: SendRewardsDto,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) res: FastifyReply,
  ): Promise<unknown> {
    const outcome = await this.dispatches.send(tenant, key, dto, req.body, {
      respondAsync: prefersRespondAsync(prefer),
      arrivedAt: arrivedAtOf(req.raw),
    });
    res.code(outcome.status);
    if (outcome.replayed) res.header('Idempotent-Replayed', 'true');
    for (const name in outcome.headers) res.header(name, outcome.headers[name]);
    return outcome.body;
  }

  @Get('rewards')
  @RequiresScope('rewards:read')
  @ApiOperation({
    summary: 'List rewards, filtered by custom field labels: `?Department=Sales&offset=0&limit=50`.',
  })
  @ApiQuery({ name: 'environment', required: false, enum: ['sandbox', 'production'] })
  @ApiQuery({ name: 'offset', required: false })
  @ApiQuery({ name: 'limit', required: false })
  @ApiOkResponse({ type: RewardListResponse })
  @ApiErrors(
    TENANT_ROUTE,
    validationFailed('limit', 'must be a whole number from 1 to 100', 'The query is invalid; see details.'),
    CONNECTION_NOT_FOUND,
    CONNECTION_NOT_ACTIVE,
    ENVIRONMENT_NOT_CONFIGURED,
    {
      status: 422,
      code: 'unknown_custom_field',
      message: 'Filter by custom field labels of the rewards account; see details.',
      details: [
        {
          field: 'Team',
          reason: 'unknown custom field label "Team"',
          known_labels: ['Department', 'Campaign', 'Region'],
        },
      ],
      when: 'a filter by a label the account does not have',
    },
    listingFailed(
      new RewardsApiError('rejected', 'Query parameter Department must be a string', 400),
      'the rewards service refused the listing',
    ),
    listingFailed(
      new RewardsApiError('transient', 'rewards service answered 503', 503),
      'the rewards service did not answer, or answered 5xx or 429',
    ),
    FIELDS_UNAVAILABLE,
    VAULT_UNAVAILABLE,
  )
  listRewards(@Param('tenant') tenant: string, @Query() query: Record<string, unknown>): Promise<unknown> {
    return this.listing.list(tenant, query);
  }

  @Get('dispatches/:id')
  @RequiresScope('rewards:read', 'rewards:send')
  @ApiOperation({ summary: 'A dispatch: status, attempts, upstream order and reward ids, last error.' })
  @ApiOkResponse({ type: DispatchResponse })
  @ApiErrors(TENANT_ROUTE, DISPATCH_NOT_FOUND, notAUuid('GET', '/v1/tenants/acme/dispatches/123'))
  get(
    @Param('tenant') tenant: string,
    @Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string,
  ): Promise<unknown> {
    return this.dispatches.get(tenant, id);
  }

  @Get('dispatches/:id/rewards')
  @RequiresScope('rewards:read', 'rewards:send')
  @ApiOperation({
    summary: 'A dispatch’s rewards, a page at a time (a batch’s view lists only the first 100).',
  })
  @ApiQuery({ name: 'offset', required: false })
  @ApiQuery({ name: 'limit', required: false, description: '1–200, default 100' })
  @ApiOkResponse({ description: '`{rewards: [...], next_offset}`, rewards as in the dispatch view.' })
  @ApiErrors(
    TENANT_ROUTE,
    validationFailed('limit', 'limit must not be greater than 200'),
    DISPATCH_NOT_FOUND,
    notAUuid('GET', '/v1/tenants/acme/dispatches/123/rewards'),
  )
  rewards(
    @Param('tenant') tenant: string,
    @Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string,
    @Query() query: PageQueryDto,
  ): Promise<unknown> {
    return this.dispatches.rewardsPage(tenant, id, query.limit ?? 100, query.offset ?? 0);
  }

  @Post('dispatches/:id/cancel')
  @RequiresScope('rewards:send')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Cancel what of a dispatch is not sent yet: its pending rewards end `cancelled`; rewards already on their way finish.',
    description: '409 dispatch_not_cancellable when every reward is settled already.',
  })
  @ApiOkResponse({ type: DispatchResponse })
  @ApiErrors(
    TENANT_ROUTE,
    DISPATCH_NOT_FOUND,
    notAUuid('POST', '/v1/tenants/acme/dispatches/123/cancel'),
    example(notCancellable(DISPATCH_ID, 'sent'), 'every reward is settled already'),
  )
  cancel(
    @Param('tenant') tenant: string,
    @Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string,
  ): Promise<unknown> {
    return this.dispatches.cancel(tenant, id);
  }

  @Get('dispatches')
  @RequiresScope('rewards:read')
  @ApiOperation({ summary: 'The tenant’s dispatches, newest first, optionally by status.' })
  @ApiOkResponse({ type: DispatchListResponse })
  @ApiErrors(
    TENANT_ROUTE,
    validationFailed(
      'status',
      'status must be one of the following values: sending, queued, sent, pending_approval, partially_failed, failed, cancelled',
    ),
  )
  list(@Param('tenant') tenant: string, @Query() query: ListDispatchesDto): Promise<unknown> {
    return this.dispatches.list(tenant, query.status, query.limit, query.offset);
  }

  @Post('recipients/erase')
  @RequiresScope('rewards:send')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Erase one recipient: redact their personal data in every dispatch, reward and pending event of the tenant.',
    description:
      'Name the recipient by exactly one of `email` (compared in lower case) or `phone` (by its digits). Their name, ' +
      'e-mail, phone, custom field values and LINK redemption links become null; ids, amounts, statuses and external ids ' +
      'stay. A reward to them not sent yet is cancelled. Answers the counts changed; audited as `recipient.erased`, ' +
      'without the recipient.',
  })
  @ApiOkResponse({
    schema: {
      type: 'object',
      properties: {
        dispatches: { type: 'integer', example: 2 },
        rewards: { type: 'integer', example: 3 },
        outbox_events: { type: 'integer', example: 0 },
      },
    },
  })
  @ApiJsonBody(ERASE_RECIPIENT_BODY_SCHEMA, {
    email: { summary: 'A recipient by e-mail', value: { email: 'ada@example.com' } },
    phone: { summary: 'A recipient by phone', value: { phone: '+1 555 010 0000' } },
  })
  @ApiErrors(
    TENANT_ROUTE,
    jsonBodyErrors(),
    validationFailed('email', 'name the recipient by exactly one of email and phone'),
  )
  erase(@Param('tenant') tenant: string, @Body(EraseBodyPipe) body: EraseRecipientDto): Promise<unknown> {
    return this.dispatches.erase(tenant, body);
  }
}
