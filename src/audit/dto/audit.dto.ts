import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ApiNextCursor, CursorQueryDto } from '../../common/page-query.dto';
import { IsIn, IsOptional, IsString, Matches } from 'class-validator';
import { AUDIT_ACTIONS, AUDIT_ACTOR_TYPES, AUDIT_VIAS, type AuditAction } from '../audit-actions';

/** `?action=&cursor=&limit=` of a tenant's audit listing. */
export class AuditQueryDto extends CursorQueryDto {
  @ApiPropertyOptional({ enum: AUDIT_ACTIONS, description: 'Only records of this action.' })
  @IsOptional()
  @IsIn(AUDIT_ACTIONS)
  action?: AuditAction;
}

/** The operators' listing also filters by tenant (any id: a deleted tenant's records stay listed). */
export class OpsAuditQueryDto extends AuditQueryDto {
  @ApiPropertyOptional({ example: 'acme', description: 'Only records of this tenant.' })
  @IsOptional()
  @IsString()
  @Matches(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, { message: 'tenant must be a tenant id (a slug)' })
  tenant?: string;
}

class AuditActorView {
  @ApiProperty({ enum: AUDIT_ACTOR_TYPES }) type: string;
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The API key id; for `connect_link`, the connect session id.',
  })
  id: string | null;
  @ApiProperty({ nullable: true, type: String, description: 'The API key’s name.' }) name: string | null;
  @ApiProperty({ enum: AUDIT_VIAS }) via: string;
}

class AuditTargetView {
  @ApiProperty({ example: 'api_key' }) type: string;
  @ApiProperty({ nullable: true, type: String }) id: string | null;
}

export class AuditEventResponse {
  @ApiProperty({ example: '1042', description: 'Increasing with time; a string (64-bit).' }) id: string;
  @ApiProperty({ format: 'date-time' }) at: string;
  @ApiProperty({ nullable: true, type: String }) tenant_id: string | null;
  @ApiProperty({ enum: AUDIT_ACTIONS }) action: string;
  @ApiProperty({ type: AuditActorView }) actor: AuditActorView;
  @ApiProperty({ nullable: true, type: String, example: '203.0.113.7' }) client_address: string | null;
  @ApiProperty({ nullable: true, type: String, description: 'The `X-Request-Id` of the change’s request.' })
  request_id: string | null;
  @ApiProperty({ type: AuditTargetView, nullable: true }) target: AuditTargetView | null;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    example: { name: 'payments-service', scopes: ['rewards:send'] },
    description: 'A small summary of the change; never a secret, key, token or personal data.',
  })
  details: Record<string, unknown>;
}

export class AuditEventListResponse {
  @ApiProperty({ type: [AuditEventResponse] }) events: AuditEventResponse[];
  @ApiNextCursor() next_cursor: string | null;
}
