import { ApiProperty } from '@nestjs/swagger';

class RecipientView {
  @ApiProperty() name: string;
  @ApiProperty() email: string;
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
  @ApiProperty({ example: 'EMAIL' }) method: string;
  @ApiProperty({ example: 'PENDING', nullable: true, type: String }) status: string | null;
}

class DispatchRewardView {
  @ApiProperty({ nullable: true, type: String, description: 'The upstream reward id, once sent.' }) id: string | null;
  @ApiProperty({ type: RecipientView }) recipient: RecipientView;
  @ApiProperty({ type: ValueView }) value: ValueView;
  @ApiProperty({ type: [String] }) products: string[];
  @ApiProperty({ type: DeliveryView }) delivery: DeliveryView;
  @ApiProperty({ type: [CustomFieldView] }) custom_fields: CustomFieldView[];
}

/** A dispatch: one send request, one upstream order. */
export class DispatchResponse {
  @ApiProperty({ format: 'uuid', description: 'Also the order’s external_id upstream.' }) id: string;
  @ApiProperty({ enum: ['sending', 'queued', 'sent', 'failed'] }) status: string;
  @ApiProperty({ enum: ['sandbox', 'production'] }) environment: string;
  @ApiProperty() idempotency_key: string;
  @ApiProperty({ nullable: true, type: String }) external_reference: string | null;
  @ApiProperty() funding_source_id: string;
  @ApiProperty({ nullable: true, type: String }) upstream_order_id: string | null;
  @ApiProperty() attempts: number;
  @ApiProperty({ nullable: true, type: String, description: 'When the worker retries a queued dispatch.' }) next_attempt_at: string | null;
  @ApiProperty({ nullable: true, type: Object, description: '{code, message, upstream_status, upstream_payload?, outcome_unknown?}' })
  last_error: Record<string, unknown> | null;
  @ApiProperty() created_at: string;
  @ApiProperty({ nullable: true, type: String }) sent_at: string | null;
  @ApiProperty({ type: [DispatchRewardView] }) rewards: DispatchRewardView[];
}

export class DispatchListResponse {
  @ApiProperty({ type: [DispatchResponse] }) dispatches: DispatchResponse[];
  @ApiProperty({ nullable: true, type: Number, description: 'Pass as offset for the next page; null on the last.' }) next_offset: number | null;
}

export class RewardListResponse {
  @ApiProperty({ type: 'array', items: { type: 'object' }, description: 'The rewards service’s rewards, each with custom_fields {id, value, label}.' })
  rewards: unknown[];
  @ApiProperty({ nullable: true, type: Number }) total_count: number | null;
  @ApiProperty() offset: number;
  @ApiProperty() limit: number;
}
