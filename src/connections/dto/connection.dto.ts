import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { REWARDS_ENVIRONMENTS, type RewardsEnvironment } from '../../config/app-config';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsOptional, IsString, MaxLength } from 'class-validator';

export class CreateConnectSessionDto {
  @ApiPropertyOptional({
    enum: REWARDS_ENVIRONMENTS,
    example: 'sandbox',
    description: 'Default: the gateway’s default environment.',
  })
  @IsOptional()
  @IsIn(REWARDS_ENVIRONMENTS)
  environment?: RewardsEnvironment;

  @ApiPropertyOptional({
    type: [String],
    example: ['default'],
    description: '`default` and/or `team_management`.',
  })
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(2)
  @IsIn(['default', 'team_management'], {
    each: true,
    message: 'each scope must be default or team_management',
  })
  scopes?: string[];

  @ApiPropertyOptional({
    example: 'https://platform.example.com/settings/rewards',
    description: 'Must be on the tenant’s return_urls.',
  })
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  return_url?: string;
}

export class ConnectSessionResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({ description: 'One-time link for the tenant admin’s browser (15 minutes).' })
  connect_url: string;
  @ApiProperty({ format: 'date-time' }) expires_at: string;
  @ApiProperty({ enum: REWARDS_ENVIRONMENTS }) environment: RewardsEnvironment;
  @ApiProperty({ type: [String] }) scopes: string[];
}

export class ConnectionQueryDto {
  @ApiPropertyOptional({ enum: REWARDS_ENVIRONMENTS })
  @IsOptional()
  @IsIn(REWARDS_ENVIRONMENTS)
  environment?: RewardsEnvironment;
}

export class ConnectionErrorView {
  @ApiProperty() code: string;
  @ApiProperty() message: string;
  @ApiProperty({ format: 'date-time' }) at: string;
}

export class ConnectionOrganizationView {
  @ApiProperty({ example: 'SFZCMH4NMC5X' }) id: string;
  @ApiProperty({ nullable: true, type: String, example: 'Acme Corp' }) name: string | null;
}

export class ConnectionResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() tenant_id: string;
  @ApiProperty({ enum: REWARDS_ENVIRONMENTS }) environment: RewardsEnvironment;
  @ApiProperty({ enum: ['active', 'needs_reauth', 'error', 'disconnected'] }) status:
    'active' | 'needs_reauth' | 'error' | 'disconnected';
  @ApiProperty({ type: [String] }) scopes: string[];
  @ApiProperty({ format: 'date-time' }) connected_at: string;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) disconnected_at: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) last_refreshed_at: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) access_expires_at: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) last_used_at: string | null;
  @ApiProperty({ nullable: true, type: ConnectionErrorView }) last_error: ConnectionErrorView | null;
  @ApiProperty() consecutive_failures: number;
  @ApiProperty() refresh_count: number;
  @ApiProperty({
    nullable: true,
    type: ConnectionOrganizationView,
    description:
      'The rewards organization the grant belongs to; a re-consent must authorize the same one. Null until known.',
  })
  organization: ConnectionOrganizationView | null;
}
