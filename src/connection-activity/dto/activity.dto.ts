import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ApiNextCursor, CursorQueryDto } from '../../common/page-query.dto';
import { IsIn, IsOptional, IsUUID } from 'class-validator';
import { UPSTREAM_OPERATIONS, type UpstreamOperation } from '../../rewards-api/call-recorder';
import { ACTIVITY_OUTCOMES, type ActivityOutcome } from '../activity.store';

/** `?dispatch_id=&outcome=&cursor=&limit=` of a tenant's connection activity. */
export class ActivityQueryDto extends CursorQueryDto {
  @ApiPropertyOptional({ format: 'uuid', description: 'Only the requests made for this dispatch.' })
  @IsOptional()
  @IsUUID('all', { message: 'dispatch_id must be a dispatch id (a UUID)' })
  dispatch_id?: string;

  @ApiPropertyOptional({ enum: ACTIVITY_OUTCOMES, description: 'Only the requests that ended so.' })
  @IsOptional()
  @IsIn(ACTIVITY_OUTCOMES)
  outcome?: ActivityOutcome;
}

export class ActivityResponse {
  @ApiProperty({ example: '1042', description: 'Increasing with the writes; a string (64-bit).' }) id: string;
  @ApiProperty({ format: 'date-time', description: 'When the request went out.' }) at: string;
  @ApiProperty({ format: 'uuid' }) connection_id: string;
  @ApiProperty({ enum: UPSTREAM_OPERATIONS, example: 'create_order' }) operation: UpstreamOperation;
  @ApiProperty({
    example: 1,
    description: 'Which request of this call: 1, then 2, 3 … for the retries after a 429 or a 401.',
  })
  attempt: number;
  @ApiProperty({
    nullable: true,
    type: Number,
    example: 200,
    description: 'The rewards service’s status; null when no answer came (a timeout, a network error).',
  })
  http_status: number | null;
  @ApiProperty({ enum: ACTIVITY_OUTCOMES }) outcome: ActivityOutcome;
  @ApiProperty({
    nullable: true,
    type: String,
    example: 'upstream_rate_limited',
    description: 'Our error code for the answer (see Error codes); null on success and on a 401 (retried).',
  })
  error_code: string | null;
  @ApiProperty({ example: 182.4, description: 'From sending the request to its whole answer (ms).' })
  latency_ms: number;
  @ApiProperty({ example: 0, description: 'How long the request waited for its account’s pacing slot (ms).' })
  pacing_wait_ms: number;
  @ApiProperty({ example: 0, description: '429s absorbed earlier in the same call (each retried).' })
  throttled_429: number;
  @ApiProperty({ nullable: true, type: String, format: 'uuid', description: 'The dispatch it served.' })
  dispatch_id: string | null;
  @ApiProperty({
    nullable: true,
    type: Number,
    description: 'The reward it served: its position in the dispatch (null when one order carried several).',
  })
  reward_position: number | null;
}

export class ActivityListResponse {
  @ApiProperty({ type: [ActivityResponse] }) activity: ActivityResponse[];
  @ApiNextCursor() next_cursor: string | null;
}
