import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  IsArray,
  IsOptional,
  IsString,
  IsUrl,
  Length,
  Matches,
  MaxLength,
  Validate,
  ValidateIf,
} from 'class-validator';
import { BrowserUrl } from '../../common/url';

const URL_OPTIONS = { require_tld: false, require_protocol: true, protocols: ['http', 'https'] };

export class CreateTenantDto {
  @ApiProperty({
    example: 'acme-corp',
    description: 'Slug: lowercase letters, digits and dashes, 2–63 characters.',
  })
  @IsString()
  @Matches(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, {
    message: 'id must be a slug: lowercase letters, digits and inner dashes, 1–63 characters',
  })
  id: string;

  @ApiProperty({ example: 'Acme Corp' })
  @IsString()
  @Length(1, 200)
  name: string;

  @ApiPropertyOptional({
    type: [String],
    example: ['https://platform.example.com/settings/rewards'],
    description: 'Allow-list of URLs a connect session may return the browser to.',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(20)
  @IsUrl(URL_OPTIONS, { each: true, message: 'each return_urls entry must be an absolute http(s) URL' })
  @Validate(BrowserUrl, { each: true })
  @MaxLength(2000, { each: true })
  return_urls?: string[];

  @ApiPropertyOptional({ example: 'BALANCE', description: 'Funding source used when a send names none.' })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  default_funding_source_id?: string;
}

export class UpdateTenantDto {
  @ApiPropertyOptional({ example: 'Acme Corporation' })
  @ValidateIf((o: UpdateTenantDto) => o.name !== undefined) // absent: unchanged; null is not a name
  @IsString()
  @Length(1, 200)
  name?: string;

  @ApiPropertyOptional({ type: [String], example: ['https://platform.example.com/settings/rewards'] })
  @ValidateIf((o: UpdateTenantDto) => o.return_urls !== undefined)
  @IsArray()
  @ArrayMaxSize(20)
  @IsUrl(URL_OPTIONS, { each: true, message: 'each return_urls entry must be an absolute http(s) URL' })
  @Validate(BrowserUrl, { each: true })
  @MaxLength(2000, { each: true })
  return_urls?: string[];

  @ApiPropertyOptional({ example: 'BALANCE', nullable: true, description: 'null clears it.' })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  default_funding_source_id?: string | null;
}

export class TenantResponse {
  @ApiProperty({ example: 'acme-corp' }) id: string;
  @ApiProperty({ example: 'Acme Corp' }) name: string;
  @ApiProperty({ type: [String] }) return_urls: string[];
  @ApiProperty({ nullable: true, type: String }) default_funding_source_id: string | null;
  @ApiProperty({ format: 'date-time', example: '2026-11-23T17:23:05.629Z', description: 'ISO 8601, UTC.' })
  created_at: string;
}

export class CreateApiKeyDto {
  @ApiProperty({ example: 'payments-service', description: 'What the key is for; shown in listings.' })
  @IsString()
  @Length(1, 100)
  name: string;
}

export class ApiKeyResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() name: string;
  @ApiProperty({ example: 'rgk_Ab3x', description: 'The first characters of the key.' }) prefix: string;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) last_used_at: string | null;
  @ApiProperty({ format: 'date-time', nullable: true, type: String }) revoked_at: string | null;
}

export class CreatedApiKeyResponse extends ApiKeyResponse {
  @ApiProperty({ description: 'The plaintext key. Shown once; only its hash is stored.' })
  key: string;
}
