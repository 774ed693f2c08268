import { ApiProperty, ApiPropertyOptional, type ApiPropertyOptions } from '@nestjs/swagger';
import { DELIVERY_METHODS } from '../../rewards-api/rewards-api.types';
import { DISPATCH_STATUSES, REWARD_STATUSES, type RewardStatus } from '../dispatch.view';

/** A nullable string property; `Time`: a nullable date-time. */
const Str = (o: ApiPropertyOptions = {}) =>
  ApiProperty({ nullable: true, type: String, ...o } as ApiPropertyOptions);
const Time = (o: ApiPropertyOptions = {}) => Str({ format: 'date-time', ...o } as ApiPropertyOptions);

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
  @Str({
    example: 'SCHEDULED',
    description: 'The service’s delivery status (SCHEDULED, PENDING, SUCCEEDED, FAILED, …).',
  })
  status: string | null;
  @Str({
    enum: ['pending', 'delivered', 'delivery_failed'],
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
  @Str({ description: 'The upstream reward id, once the order exists.' })
  id: string | null;
  @Str() upstream_order_id: string | null;
  @Str({ example: 'EXECUTED' }) upstream_order_status: string | null;
  @ApiProperty({ type: RecipientView }) recipient: RecipientView;
  @ApiProperty({ type: ValueView }) value: ValueView;
  @ApiProperty({ type: [String], nullable: true }) products: string[] | null;
  @Str() campaign_id: string | null;
  @ApiProperty({ type: DeliveryView }) delivery: DeliveryView;
  @ApiProperty({ type: [CustomFieldView] }) custom_fields: CustomFieldView[];
  @ApiProperty({ type: RewardErrorView, nullable: true, description: 'Why the reward failed.' })
  error: RewardErrorView | null;
  @Time() sent_at: string | null;
}

/** The rewards per status: one number property per reward status. */
class DispatchCountsView {}
for (const status of REWARD_STATUSES) ApiProperty({ type: Number })(DispatchCountsView.prototype, status);

class ProgressView {
  @ApiProperty({ example: 10000 }) total: number;
  @ApiProperty({ example: 2500, description: 'Rewards no longer pending or sending.' }) settled: number;
  @ApiProperty({ example: 25 }) percent: number;
  @Time({
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
  @Str() external_reference: string | null;
  @ApiProperty({ example: 'BALANCE' }) funding_source_id: string;
  @Str({ description: 'The order id when every reward is in one order.' })
  upstream_order_id: string | null;
  @ApiProperty() attempts: number;
  @Time({ description: 'When the worker retries a queued dispatch.' })
  next_attempt_at: string | null;
  @ApiProperty({
    nullable: true,
    type: Object,
    description:
      '{code, message, upstream_status, outcome_unknown?}: why the last attempt stopped, or why every reward failed.',
  })
  last_error: Record<string, unknown> | null;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @Time() sent_at: string | null;
  @ApiProperty({ type: DispatchCountsView }) counts: Record<RewardStatus, number>;
  @ApiProperty({ type: ProgressView }) progress: ProgressView;
  @Time() cancel_requested_at: string | null;
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
