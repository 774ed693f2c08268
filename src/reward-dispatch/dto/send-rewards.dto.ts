import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsEmail,
  IsIn,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Length,
  Matches,
  Max,
  Min,
  Validate,
  ValidateNested,
  type ValidationArguments,
  ValidatorConstraint,
  type ValidatorConstraintInterface,
} from 'class-validator';
import { PageQueryDto } from '../../common/page-query.dto';
import { customFieldsShapeProblem, type CustomFieldsInput } from '../../fields-cache/custom-fields';

@ValidatorConstraint({ name: 'customFields' })
class CustomFieldsShape implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return customFieldsShapeProblem(value) === null;
  }
  defaultMessage(args: ValidationArguments): string {
    return `custom_fields ${customFieldsShapeProblem(args.value)}`;
  }
}

export class RecipientDto {
  @ApiProperty({ example: 'Ada Lovelace' }) @IsString() @Length(1, 255) name: string;
  @ApiProperty({ example: 'ada@example.com' }) @IsEmail({}, { message: 'email must be an e-mail address' }) @Length(3, 254) email: string;
}

export class ValueDto {
  @ApiProperty({ example: 25 })
  @IsNumber({ allowNaN: false, allowInfinity: false, maxDecimalPlaces: 2 }, { message: 'denomination must be a number with at most two decimals' })
  @Min(0.01)
  @Max(1_000_000)
  denomination: number;

  @ApiProperty({ example: 'USD' }) @IsString() @Matches(/^[A-Z]{3}$/, { message: 'currency_code must be an ISO 4217 code such as USD' }) currency_code: string;
}

export class DeliveryDto {
  @ApiProperty({ enum: ['EMAIL'] }) @IsIn(['EMAIL']) method: 'EMAIL';
}

export class RewardSpecDto {
  @ApiProperty({ type: RecipientDto }) @IsObject() @ValidateNested() @Type(() => RecipientDto) recipient: RecipientDto;
  @ApiProperty({ type: ValueDto }) @IsObject() @ValidateNested() @Type(() => ValueDto) value: ValueDto;

  @ApiProperty({ type: [String], example: ['prod_amazon_us'] })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(10)
  @IsString({ each: true })
  @Length(1, 200, { each: true })
  products: string[];

  @ApiPropertyOptional({ type: DeliveryDto }) @IsOptional() @ValidateNested() @Type(() => DeliveryDto) delivery?: DeliveryDto;

  @ApiPropertyOptional({
    description: 'By label: `{"Department": "Sales"}`, or a list: `[{"id": "fld_…", "value": "Sales"}, {"label": "Region", "value": "EMEA"}]`.',
    oneOf: [{ type: 'object', additionalProperties: { type: 'string' } }, { type: 'array', items: { type: 'object' } }],
  })
  @IsOptional()
  @Validate(CustomFieldsShape)
  custom_fields?: CustomFieldsInput;
}

export class SendRewardsDto {
  @ApiPropertyOptional({ enum: ['sandbox', 'production'] }) @IsOptional() @IsIn(['sandbox', 'production']) environment?: 'sandbox' | 'production';

  @ApiPropertyOptional({ example: 'fs_demo_main', description: 'Default: the tenant’s default_funding_source_id.' })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  funding_source_id?: string;

  @ApiPropertyOptional({ example: 'payroll-2026-11', description: 'Your own reference, kept with the dispatch.' })
  @IsOptional()
  @IsString()
  @Length(1, 255)
  external_reference?: string;

  @ApiProperty({ type: [RewardSpecDto], description: 'One or more rewards, sent as one upstream order (at most 100).' })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(100)
  @ValidateNested({ each: true })
  @Type(() => RewardSpecDto)
  rewards: RewardSpecDto[];
}

export class ListDispatchesDto extends PageQueryDto {
  @ApiPropertyOptional({ enum: ['sending', 'queued', 'sent', 'failed'] })
  @IsOptional()
  @IsIn(['sending', 'queued', 'sent', 'failed'])
  status?: string;
}
