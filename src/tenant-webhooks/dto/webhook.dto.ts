import { ApiProperty, ApiPropertyOptional, PickType } from '@nestjs/swagger';
import { PageQueryDto } from '../../common/page-query.dto';
import { isBrowserUrl } from '../../common/url';
import {
  ArrayMaxSize,
  ArrayNotEmpty,
  ArrayUnique,
  IsArray,
  IsIn,
  IsOptional,
  IsString,
  MaxLength,
  Validate,
  type ValidationArguments,
  ValidatorConstraint,
  type ValidatorConstraintInterface,
} from 'class-validator';
import { ALL_EVENTS, MAX_URL_LENGTH, WEBHOOK_EVENT_TYPES } from '../webhook-events';

/** An absolute http(s) URL that WHATWG `new URL()` accepts, without credentials or a fragment. */
@ValidatorConstraint({ name: 'webhookUrl' })
class WebhookUrl implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    if (!isBrowserUrl(value)) return false;
    const url = new URL(value as string);
    return !url.username && !url.password && !url.hash;
  }
  defaultMessage(args: ValidationArguments): string {
    return `${args.property} must be an absolute https (or http) URL without credentials or fragment`;
  }
}

/** `["*"]` alone, or a non-empty list of distinct known event types. */
@ValidatorConstraint({ name: 'webhookEvents' })
class WildcardAlone implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return !Array.isArray(value) || !value.includes(ALL_EVENTS) || value.length === 1;
  }
  defaultMessage(): string {
    return `events must be ["*"] alone or a list of event types, not both`;
  }
}

export class CreateWebhookDto {
  @ApiProperty({ example: 'https://platform.example.com/hooks/rewards', maxLength: MAX_URL_LENGTH })
  @IsString()
  @MaxLength(MAX_URL_LENGTH)
  @Validate(WebhookUrl)
  url: string;

  @ApiProperty({
    type: [String],
    example: ['reward.sent', 'reward.delivered'],
    description: `A non-empty subset of ${WEBHOOK_EVENT_TYPES.join(', ')}; or ["*"] for every event.`,
  })
  @IsArray()
  @ArrayNotEmpty({ message: 'events must list at least one event type (or "*")' })
  @ArrayMaxSize(WEBHOOK_EVENT_TYPES.length)
  @ArrayUnique({ message: 'events must not list an event twice' })
  @IsIn([...WEBHOOK_EVENT_TYPES, ALL_EVENTS], {
    each: true,
    message: `each value in events must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}, or "*"`,
  })
  @Validate(WildcardAlone)
  events: string[];
}

/** `?limit=` (as every listing: PageQueryDto's, no offset — the newest first) and `?status=`. */
export class ListDeliveriesDto extends PickType(PageQueryDto, ['limit'] as const) {
  @ApiPropertyOptional({ enum: ['pending', 'delivered', 'failed'] })
  @IsOptional()
  @IsIn(['pending', 'delivered', 'failed'])
  status?: 'pending' | 'delivered' | 'failed';
}

export class WebhookResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() url: string;
  @ApiProperty({ type: [String] }) events: string[];
  @ApiProperty({ enum: ['active', 'failing', 'disabled'] }) status: string;
  @ApiProperty({ format: 'date-time', type: String }) created_at: Date;
  @ApiProperty({ description: 'Failed attempts since the last success.' }) consecutive_failures: number;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) failing_since: Date | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) last_success_at: Date | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) last_failure_at: Date | null;
  @ApiProperty({ nullable: true, type: String }) last_error: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) disabled_at: Date | null;
  @ApiProperty({ nullable: true, type: String }) disabled_reason: string | null;
}

export class CreatedWebhookResponse extends PickType(WebhookResponse, ['id', 'url', 'events'] as const) {
  @ApiProperty({
    example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    description: 'The signing secret (Standard Webhooks format). Shown in this response only.',
  })
  secret: string;
  @ApiProperty({ format: 'date-time', type: String }) created_at: Date;
}

export class WebhookListResponse {
  @ApiProperty({ type: [WebhookResponse] }) webhooks: WebhookResponse[];
}

export class DeliveryResponse {
  @ApiProperty({ format: 'uuid', description: 'The event id: the `webhook-id` header of every attempt.' })
  id: string;
  @ApiProperty({ example: 'reward.sent' }) type: string;
  @ApiProperty({ enum: ['pending', 'delivered', 'failed'] }) status: string;
  @ApiProperty() attempts: number;
  @ApiProperty({ nullable: true, type: Number }) last_status_code: number | null;
  @ApiProperty({ nullable: true, type: String }) last_error: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String, description: 'While pending.' })
  next_attempt_at: Date | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) last_attempt_at: Date | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) delivered_at: Date | null;
  @ApiProperty({ format: 'date-time', type: String }) created_at: Date;
}

export class DeliveryListResponse {
  @ApiProperty({ type: [DeliveryResponse] }) deliveries: DeliveryResponse[];
}
