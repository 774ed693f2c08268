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
import { ApiErrors } from '../common/api-docs';
import { Public } from '../tenants/auth/auth.decorators';
import type { WebhookOutcome } from './delivery-webhook.intake';
import { DeliveryWebhookIntake } from './delivery-webhook.intake';
import type { WebhookRequest } from './webhook-body';
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
    {
      status: 400,
      code: 'invalid_json',
      message: 'The webhook body is not valid JSON.',
      details: [{ field: 'body', reason: 'not valid UTF-8 JSON' }],
      when: 'the body does not parse, or is empty',
    },
    {
      status: 401,
      code: 'webhook_signature_invalid',
      message:
        'The Tremendous-Webhook-Signature header is missing or does not match the body; nothing was recorded.',
      when: 'no signature, or one that matches no key the gateway holds',
    },
    {
      status: 404,
      code: 'not_found',
      message: 'No rewards environment of that name sends webhooks here.',
      when: 'an environment this gateway does not serve',
    },
    {
      status: 413,
      code: 'payload_too_large',
      message: 'The webhook body is larger than 64 KiB.',
      when: 'a body over 64 KiB',
    },
    {
      status: 415,
      code: 'unsupported_media_type',
      message: 'Webhook bodies are JSON ("Content-Type: application/json").',
      details: [{ field: 'Content-Type', reason: 'text/plain is not application/json' }],
      when: 'a body that is not application/json (or compressed)',
    },
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
