import { ApiProperty, ApiSchema } from '@nestjs/swagger';
import { ConnectionResponse } from '../../connections/dto/connection.dto';
import { CONNECTION_HEALTHS } from '../ops.service';

class ProbeView {
  @ApiProperty({ format: 'date-time' }) at: string;
  @ApiProperty({ nullable: true, type: Boolean }) ok: boolean | null;
  @ApiProperty({ nullable: true, type: String }) error: string | null;
}

/** Named apart from the dispatch view's `DispatchCountsView` (one schema name, one shape). */
@ApiSchema({ name: 'ConnectionDispatchCountsView' })
class DispatchCountsView {
  @ApiProperty() sent: number;
  @ApiProperty() failed: number;
  @ApiProperty({ description: 'queued or being sent' }) queued: number;
}

class EventView {
  @ApiProperty({ example: 'token_refreshed' }) type: string;
  @ApiProperty({ type: Object }) detail: unknown;
  @ApiProperty({ format: 'date-time' }) at: string;
}

export class ConnectionHealthResponse extends ConnectionResponse {
  @ApiProperty() tenant_name: string;
  @ApiProperty({ enum: CONNECTION_HEALTHS, nullable: true }) health: string | null;
  @ApiProperty({ nullable: true, type: ProbeView }) last_probe: ProbeView | null;
  @ApiProperty({ type: DispatchCountsView, description: 'in the last 24 hours' })
  dispatches_24h: DispatchCountsView;
}

export class ConnectionHealthDetailResponse extends ConnectionHealthResponse {
  @ApiProperty({ type: [EventView], description: 'the last 50 events, newest first' }) events: EventView[];
}

export class ConnectionHealthListResponse {
  @ApiProperty({ type: [ConnectionHealthResponse] }) connections: ConnectionHealthResponse[];
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'pass as `cursor` for the next page; null on the last page',
  })
  next_cursor: string | null;
  @ApiProperty({
    nullable: true,
    type: Number,
    description: 'offset paging (kept for compatibility): the next page’s offset; null on the last page',
  })
  next_offset: number | null;
}
