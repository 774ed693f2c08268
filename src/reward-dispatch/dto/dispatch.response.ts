import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { DELIVERY_METHODS } from '../../rewards-api/rewards-api.types';
import { DISPATCH_STATUSES, REWARD_STATUSES } from '../dispatch.view';

class RecipientView {
  @ApiProperty() name: string;
  @ApiPropertyOptional() email?: string;
  @ApiPropertyOptional() phone?: string;
}

class ValueView {
  @ApiProperty() denomination: number;
  @ApiProperty() currency_code: string;
}

class CustomFieldView {
  @ApiProperty({ example: 'FLDDEPARTMENT' }) id: string;
  @ApiProperty({ example: 'Department' }) label: string;
  @ApiProperty({ example: 'Sales' }) value: string;
}

class DeliveryView {
  @ApiProperty({ enum: DELIVERY_METHODS }) method: string;
  @ApiProperty({
    example: 'SCHEDULED',
    nullable: true,
    type: String,
    description: 'The service’s delivery status (SCHEDULED, PENDING, SUCCEEDED, FAILED, …).',
  })
  status: string | null;
  @ApiProperty({
    enum: ['pending', 'delivered', 'delivery_failed'],
    nullable: true,
    type: String,
    description:
      'Ours, from the service’s delivery webhooks or reconciliation: pending (sent, not known delivered yet), delivered, delivery_failed; null for LINK or not sent.',
  })
  state: string | null;
  @ApiPropertyOptional({ description: 'Why the delivery failed (the service’s reason).' })
  failure_reason?: string;
  @ApiPropertyOptional({
    description: 'LINK delivery: the redemption link (returned once by the service; kept encrypted).',
  })
  link?: string;
}

class RewardErrorView {
  @ApiProperty({ example: 'insufficient_funds' }) code: string;
  @ApiProperty() message: string;
  @ApiPropertyOptional({ nullable: true, type: Number }) upstream_status?: number | null;
  @ApiPropertyOptional({ nullable: true, type: Object }) upstream_payload?: unknown;
  @ApiPropertyOptional() outcome_unknown?: boolean;
}

class DispatchRewardView {
  @ApiProperty() position: number;
  @ApiProperty({
    description:
      'The order’s external_id upstream: `<dispatch id>-r<position>` (single shape) or the dispatch id (array).',
  })
  external_id: string;
  @ApiProperty({ enum: REWARD_STATUSES }) status: string;
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The upstream reward id, once the order exists.',
  })
  id: string | null;
  @ApiProperty({ nullable: true, type: String }) upstream_order_id: string | null;
  @ApiProperty({ nullable: true, type: String, example: 'EXECUTED' }) upstream_order_status: string | null;
  @ApiProperty({ type: RecipientView }) recipient: RecipientView;
  @ApiProperty({ type: ValueView }) value: ValueView;
  @ApiProperty({ type: [String], nullable: true }) products: string[] | null;
  @ApiProperty({ type: String, nullable: true }) campaign_id: string | null;
  @ApiProperty({ type: DeliveryView }) delivery: DeliveryView;
  @ApiProperty({ type: [CustomFieldView] }) custom_fields: CustomFieldView[];
  @ApiProperty({ type: RewardErrorView, nullable: true, description: 'Why the reward failed.' })
  error: RewardErrorView | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) sent_at: string | null;
}

class DispatchCountsView {
  @ApiProperty() pending: number;
  @ApiProperty() sending: number;
  @ApiProperty() sent: number;
  @ApiProperty() pending_approval: number;
  @ApiProperty() failed: number;
  @ApiProperty() cancelled: number;
}

class ProgressView {
  @ApiProperty({ example: 10000 }) total: number;
  @ApiProperty({ example: 2500, description: 'Rewards no longer pending or sending.' }) settled: number;
  @ApiProperty({ example: 25 }) percent: number;
  @ApiProperty({
    format: 'date-time',
    nullable: true,
    type: String,
    description: 'While rewards are open: when the rest should be settled at the account’s configured pace.',
  })
  estimated_completion_at: string | null;
}

class WarningView {
  @ApiProperty({ example: 'rewards[43].recipient' }) field: string;
  @ApiProperty({ example: 'same recipient as rewards[3] (allowed; sent twice)' }) reason: string;
  @ApiProperty({ example: 'duplicate_recipient' }) code: string;
}

/** A dispatch: one send request (one Idempotency-Key) of one or more rewards. */
export class DispatchResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({
    enum: DISPATCH_STATUSES,
    description: 'sending / queued while worked on; then derived from the rewards.',
  })
  status: string;
  @ApiProperty({ enum: ['sandbox', 'production'] }) environment: string;
  @ApiProperty({ enum: ['single', 'array'] }) order_shape: string;
  @ApiProperty() idempotency_key: string;
  @ApiProperty({ nullable: true, type: String }) external_reference: string | null;
  @ApiProperty({ example: 'BALANCE' }) funding_source_id: string;
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The order id when every reward is in one order.',
  })
  upstream_order_id: string | null;
  @ApiProperty() attempts: number;
  @ApiProperty({
    format: 'date-time',
    nullable: true,
    type: String,
    description: 'When the worker retries a queued dispatch.',
  })
  next_attempt_at: string | null;
  @ApiProperty({
    nullable: true,
    type: Object,
    description:
      '{code, message, upstream_status, outcome_unknown?}: why the last attempt stopped, or why every reward failed.',
  })
  last_error: Record<string, unknown> | null;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) sent_at: string | null;
  @ApiProperty({ type: DispatchCountsView }) counts: DispatchCountsView;
  @ApiProperty({ type: ProgressView }) progress: ProgressView;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) cancel_requested_at: string | null;
  @ApiProperty({
    type: [WarningView],
    description: 'The same recipient twice in the request (allowed), at most 100.',
  })
  warnings: WarningView[];
  @ApiProperty({
    description:
      'True when `rewards` lists only the first 100: page through the rest with `…/dispatches/{id}/rewards`.',
  })
  rewards_truncated: boolean;
  @ApiProperty({ type: [DispatchRewardView] }) rewards: DispatchRewardView[];
}

export class DispatchListResponse {
  @ApiProperty({ type: [DispatchResponse] }) dispatches: DispatchResponse[];
  @ApiProperty({
    nullable: true,
    type: Number,
    description: 'Pass as offset for the next page; null on the last.',
  })
  next_offset: number | null;
}

export class RewardListResponse {
  @ApiProperty({
    type: 'array',
    items: { type: 'object' },
    description: 'The rewards service’s rewards, each with custom_fields {id, value, label}.',
  })
  rewards: unknown[];
  @ApiProperty({ nullable: true, type: Number }) total_count: number | null;
  @ApiProperty() offset: number;
  @ApiProperty() limit: number;
}
