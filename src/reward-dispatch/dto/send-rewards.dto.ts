import { Injectable, type PipeTransform } from '@nestjs/common';
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FromSchema } from 'json-schema-to-ts';
import { type ErrorDetail, ValidationFailedError } from '../../common/app-error';
import type { DispatchConfig } from '../../config/app-config';
import { InjectConfig } from '../../config/config.module';
import { DELIVERY_METHODS } from '../../rewards-api/rewards-api.types';

/**
 * The body of `POST /v1/tenants/{tenant}/rewards`, as one schema: ajv validates it, the OpenAPI document shows it, and
 * its TypeScript type is derived from it. OpenAPI 3.0 dialect: `nullable: true` (an optional property also takes
 * null), `example`, one `type` per schema. A value's `title` is its rule in words: `<field> must be <title>`.
 */

/** A custom field's value; checked against the field's data type once the fields are resolved. */
const CUSTOM_FIELD_VALUE = {
  anyOf: [
    { type: 'string', maxLength: 5_000 },
    { type: 'number' },
    { type: 'boolean' },
    { type: 'array', maxItems: 100, items: { type: 'string', maxLength: 1_000 } },
  ],
} as const;

/** A recipient's e-mail address and phone number, as the send and erase bodies take them. */
export const EMAIL = {
  type: 'string',
  format: 'email',
  maxLength: 254,
  title: 'an e-mail address of at most 254 characters',
} as const;
export const PHONE = {
  type: 'string',
  pattern: '^\\+?[0-9][0-9 ().-]{5,24}$',
  title: 'a phone number: digits, spaces or dashes, an optional leading +',
} as const;

const REWARD_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['recipient', 'value'],
  properties: {
    recipient: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: {
          type: 'string',
          minLength: 1,
          maxLength: 255,
          title: 'a string of 1–255 characters',
          example: 'Ada Lovelace',
        },
        email: {
          ...EMAIL,
          nullable: true,
          description: 'Required for EMAIL delivery (the default).',
          example: 'ada@example.com',
        },
        phone: {
          ...PHONE,
          nullable: true,
          description: 'Required for PHONE (SMS) delivery; non-US numbers with a + country code.',
          example: '+14155550100',
        },
      },
    },
    value: {
      type: 'object',
      additionalProperties: false,
      required: ['denomination', 'currency_code'],
      properties: {
        denomination: {
          type: 'number',
          minimum: 0.01,
          maximum: 1_000_000,
          multipleOf: 0.01,
          title: 'a number from 0.01 to 1000000 with at most two decimals',
          example: 25,
        },
        currency_code: {
          type: 'string',
          pattern: '^[A-Z]{3}$',
          title: 'an ISO 4217 code such as USD',
          example: 'USD',
        },
      },
    },
    products: {
      type: 'array',
      nullable: true,
      minItems: 1,
      maxItems: 10,
      items: { type: 'string', minLength: 1, maxLength: 200, title: 'a product id of 1–200 characters' },
      title: 'a list of 1–10 product ids',
      description: 'Product ids; or name a campaign_id (at least one of the two).',
      example: ['PRODAMAZONUS'],
    },
    campaign_id: {
      type: 'string',
      nullable: true,
      pattern: '^[A-Z0-9]{4,20}$',
      title: '4–20 capital letters or digits',
      description: 'A campaign of the rewards account (its products, copy and look).',
      example: 'CAMPAIGNDEMO1',
    },
    delivery: {
      type: 'object',
      nullable: true,
      additionalProperties: false,
      required: ['method'],
      properties: {
        method: {
          type: 'string',
          enum: DELIVERY_METHODS,
          title: `one of ${DELIVERY_METHODS.join(', ')}`,
          description: 'EMAIL (default), LINK (the redemption link is returned once) or PHONE (SMS).',
        },
      },
    },
    custom_fields: {
      title:
        '{"<label>": <value>} or [{"id" or "label": …, "value": <value>}], at most 100 fields, each value a string ' +
        '(at most 5000 characters), a number, a boolean or a list of at most 100 strings',
      description:
        'By label: `{"Department": "Sales"}`, or a list: `[{"id": "FLDDEPARTMENT", "value": "Sales"}, {"label": "Region", "value": "EMEA"}]`. ' +
        'Values are checked against the field’s data type: a boolean for Checkbox, a number for Number/Currency, a list of options for List, a string otherwise.',
      example: { Department: 'Sales' },
      anyOf: [
        { type: 'object', nullable: true, maxProperties: 100, additionalProperties: CUSTOM_FIELD_VALUE },
        {
          type: 'array',
          maxItems: 100,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['value'],
            properties: {
              id: { type: 'string', minLength: 1, maxLength: 255 },
              label: { type: 'string', minLength: 1, maxLength: 255 },
              value: CUSTOM_FIELD_VALUE,
            },
            oneOf: [{ required: ['id'] }, { required: ['label'] }],
          },
        },
      ],
    },
  },
} as const;

export const SEND_REWARDS_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['rewards'],
  properties: {
    environment: {
      type: 'string',
      nullable: true,
      enum: ['sandbox', 'production', null],
      title: 'one of sandbox, production',
      description: 'Default: REWARDS_DEFAULT_ENVIRONMENT.',
    },
    funding_source_id: {
      type: 'string',
      nullable: true,
      minLength: 1,
      maxLength: 200,
      title: 'a string of 1–200 characters',
      description:
        'A funding source id, or BALANCE, INVOICE, INVOICE_THEN_BALANCE (any case). Default: the tenant’s default_funding_source_id, else BALANCE.',
      example: 'BALANCE',
    },
    external_reference: {
      type: 'string',
      nullable: true,
      minLength: 1,
      maxLength: 255,
      title: 'a string of 1–255 characters',
      description: 'Your own reference, kept with the dispatch.',
      example: 'payroll-2026-11',
    },
    rewards: {
      type: 'array',
      minItems: 1,
      maxItems: 10_000, // the most DISPATCH_MAX_REWARDS allows (validateSendBody applies the gateway's)
      items: REWARD_SCHEMA,
      title: 'a list of 1–10000 rewards',
      description:
        'More than DISPATCH_INLINE_MAX_REWARDS (default 10) make a batch answered 202 at once. One upstream order each ' +
        '(`single` order shape), or one order for all (`array`).',
    },
  },
} as const;

export type SendRewardsDto = FromSchema<typeof SEND_REWARDS_BODY_SCHEMA>;
export type RewardSpecDto = SendRewardsDto['rewards'][number];

/** At most this many details are reported, one per field. */
export const MAX_SEND_BODY_DETAILS = 100;

const ajv = new Ajv({
  verbose: true, // each error carries its schema, whose title is the reason
  strict: true,
  strictRequired: false, // a custom-field entry's `oneOf: [{required: ['id']}, {required: ['label']}]`
  // ajv divides in floating point (0.29 / 0.01 = 28.999999999999996); this tolerance accepts every amount in cents up
  // to 1,000,000 (the largest error there is 1.5e-8) and still refuses any third decimal.
  multipleOfPrecision: 7,
});
addFormats(ajv, ['email']);
ajv.addKeyword({ keyword: 'example', schemaType: ['string', 'number', 'boolean', 'array', 'object'] });

const validateBody = ajv.compile<SendRewardsDto>(SEND_REWARDS_BODY_SCHEMA);

type SchemaNode = {
  type?: string;
  nullable?: boolean;
  title?: string;
  properties?: Record<string, SchemaNode>;
  required?: readonly string[];
  additionalProperties?: unknown;
  items?: SchemaNode;
  minItems?: number;
  maxItems?: number;
};

/** A value's rule in words: its title, or for an object the properties it takes. */
function expected(node: SchemaNode | undefined): string | undefined {
  if (node?.title) return node.title;
  if (node?.properties) return `an object {${Object.keys(node.properties).join(', ')}}`;
  return undefined;
}

const mustBe = (field: string, node: SchemaNode | undefined) => {
  const rule = expected(node);
  return rule ? `${field} must be ${rule}` : `${field} is invalid`;
};

/** `rewards[3]`, `rewards[3].value`: the naming of fields in every `validation_failed` (digits in brackets). */
const child = (path: string, name: string) =>
  !path ? name : /^\d+$/.test(name) ? `${path}[${name}]` : `${path}.${name}`;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** An ajv error as a detail: the field it is about (below `path`, where the checked value sits), and its rule. */
function detailOf(error: ErrorObject, path: string): ErrorDetail {
  const field = error.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce(child, path);
  return { field, reason: mustBe(field, error.parentSchema as SchemaNode) };
}

const leafValidators = new Map<SchemaNode, ValidateFunction>();

/**
 * The details of a refused body: objects with properties, and the list of rewards, are walked so that every bad field
 * is named once; any other value is checked whole by ajv (first error only), so naming faults costs one read.
 */
class Details {
  readonly list: ErrorDetail[] = [];

  get full(): boolean {
    return this.list.length >= MAX_SEND_BODY_DETAILS;
  }

  add(field: string, reason: string): void {
    if (!this.full) this.list.push({ field, reason });
  }

  walk(node: SchemaNode, value: unknown, path: string): void {
    if (this.full || (value === null && node.nullable)) return;
    if (node.properties) this.object(node, node.properties, value, path);
    else if (node.items?.properties) this.array(node, node.items, value, path);
    else this.leaf(node, value, path);
  }

  private object(node: SchemaNode, properties: Record<string, SchemaNode>, value: unknown, path: string) {
    if (!isObject(value)) {
      if (path) this.add(path, mustBe(path, node));
      else this.add('body', 'the request body must be a JSON object');
      return;
    }
    for (const name of node.required ?? []) {
      if (Object.hasOwn(value, name)) continue;
      const field = child(path, name);
      const rule = expected(properties[name]);
      this.add(field, rule ? `${field} is required and must be ${rule}` : `${field} is required`);
    }
    for (const name in value) {
      if (this.full) return;
      const field = child(path, name);
      if (Object.hasOwn(properties, name)) this.walk(properties[name], value[name], field);
      else if (node.additionalProperties === false) this.add(field, `property ${field} is not allowed`);
    }
  }

  private array(node: SchemaNode, items: SchemaNode, value: unknown, path: string) {
    const { minItems = 0, maxItems = Infinity } = node;
    if (!Array.isArray(value) || value.length < minItems || value.length > maxItems)
      return this.add(path, mustBe(path, node));
    for (let i = 0; i < value.length && !this.full; i++) this.walk(items, value[i], `${path}[${i}]`);
  }

  private leaf(node: SchemaNode, value: unknown, path: string) {
    let validate = leafValidators.get(node);
    if (!validate) leafValidators.set(node, (validate = ajv.compile(node)));
    // The last error is the outermost: an anyOf's own error follows those of its alternatives.
    const error = validate(value) ? undefined : validate.errors?.at(-1);
    if (error) this.list.push(detailOf(error, path)); // not full: walk() checked
  }
}

/**
 * The details of a `validation_failed` error for a send body (not modified; missing: `{}`), or `[]`. Beyond
 * `maxRewards` (DISPATCH_MAX_REWARDS) rewards, the rewards themselves are not looked at.
 */
export function validateSendBody(body: unknown, maxRewards: number): ErrorDetail[] {
  const value = body ?? {};
  const rewards = (value as { rewards?: unknown }).rewards;
  if (Array.isArray(rewards) && rewards.length > maxRewards)
    return [
      {
        field: 'rewards',
        reason: `rewards must contain at most ${maxRewards} rewards (it has ${rewards.length})`,
      },
    ];
  if (validateBody(value)) return [];
  const details = new Details();
  details.walk(SEND_REWARDS_BODY_SCHEMA, value, '');
  // The walk reads only what the schema's objects and lists say; should a rule elsewhere refuse the body, name it.
  const error = validateBody.errors?.at(-1);
  return details.list.length || !error ? details.list : [detailOf(error, '')];
}

/**
 * The send route's body check (validateSendBody). `SendRewardsDto` is a type, not a class, so the global ValidationPipe
 * leaves the parameter alone.
 */
@Injectable()
export class SendBodyPipe implements PipeTransform<unknown, SendRewardsDto> {
  constructor(@InjectConfig('dispatch') private readonly config: DispatchConfig) {}

  transform(body: unknown): SendRewardsDto {
    const details = validateSendBody(body, this.config.maxRewards);
    if (details.length) throw new ValidationFailedError(details);
    return (body ?? {}) as SendRewardsDto;
  }
}
