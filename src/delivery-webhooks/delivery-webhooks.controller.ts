import { Controller, Headers, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import {
  ApiBody,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { ApiErrors, example } from '../common/api-docs';
import { Public } from '../tenants/auth/auth.decorators';
import type { WebhookOutcome } from './delivery-webhook.intake';
import { DeliveryWebhookIntake } from './delivery-webhook.intake';
import { type WebhookRequest, notJson, notJsonType, notServed, tooLarge } from './webhook-body';
import { WebhookSignatureInvalidError } from './delivery-webhooks.errors';
import { SIGNATURE_HEADER } from './webhook-signature';

/** Where the rewards service posts its webhooks: outside `/v1`, no API key — the signature is the authentication. */
@ApiTags('delivery webhooks')
@Controller('webhooks/rewards')
export class DeliveryWebhooksController {
  constructor(private readonly intake: DeliveryWebhookIntake) {}

  @Post(':environment')
  @Public()
  @HttpCode(200)
  @ApiOperation({
    summary:
      'The rewards service’s webhooks (REWARDS.DELIVERY.SUCCEEDED / FAILED), registered by the gateway per connection. ' +
      'Signed with HMAC-SHA256 of the body and the webhook’s private key; 401 webhook_signature_invalid otherwise. ' +
      'Deduplicated by uuid; other events are answered 200 and ignored. JSON, at most 64 KiB.',
  })
  @ApiParam({ name: 'environment', enum: ['sandbox', 'production'] })
  @ApiQuery({
    name: 'account',
    required: false,
    description: 'The registration id the gateway put in the URL.',
  })
  @ApiHeader({
    name: 'Tremendous-Webhook-Signature',
    description: 'sha256=<hex HMAC-SHA256(private key, body)>',
  })
  @ApiBody({
    description:
      'The event exactly as the rewards service sends it: only a body signed with the webhook’s private key is accepted.',
    schema: { type: 'object' },
    examples: {
      succeeded: {
        summary: 'A reward was delivered (needs the service’s signature)',
        value: {
          event: 'REWARDS.DELIVERY.SUCCEEDED',
          uuid: '9c3b2a41-7d0e-4f5a-8b6c-1e2d3f4a5b6c',
          created_utc: '2026-11-23T17:23:05.629+00:00',
          payload: { resource: { id: '4SBVBQGUZOGR', type: 'rewards' }, meta: {} },
        },
      },
    },
  })
  @ApiOkResponse({
    description: 'Recorded (`applied`), seen before (`duplicate`) or not a delivery event (`ignored`).',
    schema: { type: 'object', example: { received: true, outcome: 'applied' } },
  })
  @ApiErrors(
    example(notJson(), 'the body does not parse, or is empty'),
    example(new WebhookSignatureInvalidError(), 'no signature, or one that matches no key the gateway holds'),
    example(notServed(), 'an environment this gateway does not serve'),
    example(tooLarge(), 'a body over 64 KiB'),
    example(notJsonType('text/plain'), 'a body that is not application/json (or compressed)'),
  )
  receive(
    @Param('environment') environment: string,
    @Query('account') account: unknown,
    @Headers(SIGNATURE_HEADER) signature: string | undefined,
    @Req() req: WebhookRequest,
  ): Promise<{ received: true; outcome: WebhookOutcome }> {
    return this.intake.receive(
      environment,
      typeof account === 'string' ? account : undefined,
      signature,
      req.body,
    );
  }
}
