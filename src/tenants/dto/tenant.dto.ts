import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsInt,
  IsOptional,
  IsString,
  IsUrl,
  Length,
  Matches,
  Max,
  MaxLength,
  Min,
  Validate,
  ValidateIf,
  type ValidationArguments,
  ValidatorConstraint,
  type ValidatorConstraintInterface,
} from 'class-validator';
import { BrowserUrl } from '../../common/url';
import { DEFAULT_ROTATION_GRACE_S, MAX_ROTATION_GRACE_S } from '../api-keys.service';
import { API_KEY_SCOPES, type ApiKeyScope, isApiKeyScope } from '../auth/principal';

const URL_OPTIONS = { require_tld: false, require_protocol: true, protocols: ['http', 'https'] };

/** Up to 20 absolute http(s) URLs a browser may be sent to; listed bottom-up, the order stacked decorators run in. */
const ReturnUrls = () =>
  applyDecorators(
    MaxLength(2000, { each: true }),
    Validate(BrowserUrl, { each: true }),
    IsUrl(URL_OPTIONS, { each: true, message: 'each return_urls entry must be an absolute http(s) URL' }),
    ArrayMaxSize(20),
    IsArray(),
  );

/** A timestamp that may be null, as an ISO 8601 string. */
const NullableDateTime = (description?: string) =>
  ApiProperty({ format: 'date-time', nullable: true, type: String, description });

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
  @ReturnUrls()
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
  @ReturnUrls()
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

/** Each entry one of the API key scopes; the unknown ones named. */
@ValidatorConstraint({ name: 'knownScopes' })
class KnownScopes implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return !Array.isArray(value) || value.every(isApiKeyScope);
  }
  defaultMessage(args: ValidationArguments): string {
    const unknown = (args.value as unknown[]).filter((v) => !isApiKeyScope(v));
    return `unknown scope ${unknown.map((v) => JSON.stringify(v)).join(', ')}; the scopes are ${API_KEY_SCOPES.join(', ')}`;
  }
}

export class CreateApiKeyDto {
  @ApiProperty({ example: 'payments-service', description: 'What the key is for; shown in listings.' })
  @IsString()
  @Length(1, 100)
  name: string;

  @ApiPropertyOptional({
    type: [String],
    enum: API_KEY_SCOPES,
    example: ['rewards:send', 'rewards:read'],
    description:
      'What the key may do (docs/api.md lists the scope of every route). Default: every scope. An operator key has every scope.',
  })
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty({ message: 'scopes must list at least one scope (leave it out for every scope)' })
  @ArrayMaxSize(20)
  @Validate(KnownScopes)
  scopes?: ApiKeyScope[];
}

export class RotateApiKeyDto {
  @ApiPropertyOptional({
    example: 3600,
    minimum: 0,
    maximum: MAX_ROTATION_GRACE_S,
    default: DEFAULT_ROTATION_GRACE_S,
    description:
      'How long the old key keeps working, in seconds (0: it stops now). Default 24 h, at most 7 days.',
  })
  @IsOptional()
  @IsInt({ message: 'grace_period_seconds must be a whole number of seconds' })
  @Min(0)
  @Max(MAX_ROTATION_GRACE_S)
  grace_period_seconds?: number;
}

export class ApiKeyResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() name: string;
  @ApiProperty({ example: 'rgk_Ab3x', description: 'The first characters of the key.' }) prefix: string;
  @ApiProperty({ type: [String], enum: API_KEY_SCOPES, example: ['rewards:send', 'rewards:read'] })
  scopes: ApiKeyScope[];
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @NullableDateTime('Last successful use, written at most about once a minute per gateway instance.')
  last_used_at: string | null;
  @NullableDateTime('When the key stops working: the end of a rotated key’s grace period. Null: no expiry.')
  expires_at: string | null;
  @NullableDateTime() revoked_at: string | null;
  @ApiProperty({
    format: 'uuid',
    nullable: true,
    type: String,
    description: 'On a key made by a rotation: the key it replaces.',
  })
  rotated_from: string | null;
}

export class CreatedApiKeyResponse extends ApiKeyResponse {
  @ApiProperty({ description: 'The plaintext key. Shown once; only its hash is stored.' })
  key: string;
}

export class RotatedApiKeyResponse extends CreatedApiKeyResponse {
  @ApiProperty({
    type: ApiKeyResponse,
    description: 'The old key, with the end of its grace period (`expires_at`).',
  })
  previous_key: ApiKeyResponse;
}
