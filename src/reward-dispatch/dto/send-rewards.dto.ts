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
import { DELIVERY_METHODS, type DeliveryMethod } from '../../rewards-api/rewards-api.types';
import { DISPATCH_STATUSES } from '../dispatch.view';

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

  @ApiPropertyOptional({
    example: 'ada@example.com',
    description: 'Required for EMAIL delivery (the default).',
  })
  @IsOptional()
  @IsEmail({}, { message: 'email must be an e-mail address' })
  @Length(3, 254)
  email?: string;

  @ApiPropertyOptional({
    example: '+14155550100',
    description: 'Required for PHONE (SMS) delivery; non-US numbers with a + country code.',
  })
  @IsOptional()
  @IsString()
  @Matches(/^\+?[0-9][0-9 ().-]{5,24}$/, {
    message: 'phone must be a phone number: digits, spaces or dashes, an optional leading +',
  })
  phone?: string;
}

export class ValueDto {
  @ApiProperty({ example: 25 })
  @IsNumber(
    { allowNaN: false, allowInfinity: false, maxDecimalPlaces: 2 },
    { message: 'denomination must be a number with at most two decimals' },
  )
  @Min(0.01)
  @Max(1_000_000)
  denomination: number;

  @ApiProperty({ example: 'USD' })
  @IsString()
  @Matches(/^[A-Z]{3}$/, { message: 'currency_code must be an ISO 4217 code such as USD' })
  currency_code: string;
}

export class DeliveryDto {
  @ApiProperty({
    enum: DELIVERY_METHODS,
    description: 'EMAIL (default), LINK (the redemption link is returned once) or PHONE (SMS).',
  })
  @IsIn(DELIVERY_METHODS, { message: `method must be one of ${DELIVERY_METHODS.join(', ')}` })
  method: DeliveryMethod;
}

export class RewardSpecDto {
  @ApiProperty({ type: RecipientDto })
  @IsObject()
  @ValidateNested()
  @Type(() => RecipientDto)
  recipient: RecipientDto;
  @ApiProperty({ type: ValueDto }) @IsObject() @ValidateNested() @Type(() => ValueDto) value: ValueDto;

  @ApiPropertyOptional({
    type: [String],
    example: ['PRODAMAZONUS'],
    description: 'Product ids; or name a campaign_id (at least one of the two).',
  })
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(10)
  @IsString({ each: true })
  @Length(1, 200, { each: true })
  products?: string[];

  @ApiPropertyOptional({
    example: 'CAMPAIGNDEMO1',
    description: 'A campaign of the rewards account (its products, copy and look).',
  })
  @IsOptional()
  @IsString()
  @Matches(/^[A-Z0-9]{4,20}$/, { message: 'campaign_id must be 4–20 capital letters or digits' })
  campaign_id?: string;

  @ApiPropertyOptional({ type: DeliveryDto })
  @IsOptional()
  @IsObject({ message: 'delivery must be an object such as {"method": "EMAIL"}' })
  @ValidateNested()
  @Type(() => DeliveryDto)
  delivery?: DeliveryDto;

  @ApiPropertyOptional({
    description:
      'By label: `{"Department": "Sales"}`, or a list: `[{"id": "FLDDEPARTMENT", "value": "Sales"}, {"label": "Region", "value": "EMEA"}]`. ' +
      'Values are checked against the field’s data type: a boolean for Checkbox, a number for Number/Currency, a list of options for List, a string otherwise.',
    oneOf: [
      { type: 'object', additionalProperties: {} },
      { type: 'array', items: { type: 'object' } },
    ],
    example: { Department: 'Sales' },
  })
  @IsOptional()
  @Validate(CustomFieldsShape)
  custom_fields?: CustomFieldsInput;
}

export class SendRewardsDto {
  @ApiPropertyOptional({ enum: ['sandbox', 'production'] })
  @IsOptional()
  @IsIn(['sandbox', 'production'])
  environment?: 'sandbox' | 'production';

  @ApiPropertyOptional({
    example: 'BALANCE',
    description:
      'A funding source id, or BALANCE, INVOICE, INVOICE_THEN_BALANCE (any case). Default: the tenant’s default_funding_source_id, else BALANCE.',
  })
  @IsOptional()
  @IsString()
  @Length(1, 200)
  funding_source_id?: string;

  @ApiPropertyOptional({
    example: 'payroll-2026-11',
    description: 'Your own reference, kept with the dispatch.',
  })
  @IsOptional()
  @IsString()
  @Length(1, 255)
  external_reference?: string;

  @ApiProperty({
    type: [RewardSpecDto],
    description:
      'One or more rewards (at most 10,000; more than DISPATCH_INLINE_MAX_REWARDS, default 10, make a batch answered 202 at once): one upstream order each (`single` order shape), or one order for all (`array`).',
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(10_000)
  @IsObject({ each: true, message: 'each reward must be an object' })
  @ValidateNested({ each: true })
  @Type(() => RewardSpecDto)
  rewards: RewardSpecDto[];
}

export class ListDispatchesDto extends PageQueryDto {
  @ApiPropertyOptional({ enum: DISPATCH_STATUSES })
  @IsOptional()
  @IsIn(DISPATCH_STATUSES)
  status?: string;
}
