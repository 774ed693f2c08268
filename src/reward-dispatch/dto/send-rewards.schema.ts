import Ajv, { type ErrorObject, type SchemaValidateFunction, type ValidateFunction } from 'ajv';
import { isEmail, length } from 'class-validator';
import type { ErrorDetail } from '../../common/app-error';
import { customFieldsShapeProblem } from '../../fields-cache/custom-fields';
import { DELIVERY_METHODS } from '../../rewards-api/rewards-api.types';

/**
 * The body of `POST /v1/tenants/{tenant}/rewards` as a JSON Schema (draft-07), compiled once with ajv: the same rules
 * as `SendRewardsDto` under the global ValidationPipe (whitelist + forbidNonWhitelisted, so `additionalProperties:
 * false` everywhere class-validator whitelists; `@IsOptional()` lets `null` through, so optional properties also take
 * null), reported as the pipe reports them: one detail per bad field, named by its path (`rewards[3].recipient.email`).
 *
 * Three keywords are custom ajv keywords defined below, so that both validators decide exactly alike:
 * - `textLength: [min, max]`: class-validator's `Length` (code points, a U+FE0E/U+FE0F after a character not counted),
 *   where `minLength`/`maxLength` would count differently;
 * - `maxDecimalPlaces`: `IsNumber({maxDecimalPlaces})`'s decimal count (`multipleOf: 0.01` fails 0.29 in floating point);
 * - `customFieldsShape`: `customFieldsShapeProblem()`, the custom-fields constraint of the DTO (null passes).
 * The `email` format is class-validator's (validator.js') `isEmail` with the DTO's options.
 *
 * The most rewards a body may hold is a parameter of `validateSendBody`, not part of the schema.
 */

const REWARD_SCHEMA = {
  type: 'object',
  description: 'an object (a reward)',
  additionalProperties: false,
  required: ['recipient', 'value'],
  properties: {
    recipient: {
      type: 'object',
      description: 'an object {name, email, phone}',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', textLength: [1, 255], description: 'a string of 1–255 characters' },
        email: {
          type: ['string', 'null'],
          format: 'email',
          textLength: [3, 254],
          description: 'an e-mail address of 3–254 characters',
        },
        phone: {
          type: ['string', 'null'],
          pattern: '^\\+?[0-9][0-9 ().-]{5,24}$',
          description: 'a phone number: digits, spaces or dashes, an optional leading +',
        },
      },
    },
    value: {
      type: 'object',
      description: 'an object {denomination, currency_code}',
      additionalProperties: false,
      required: ['denomination', 'currency_code'],
      properties: {
        denomination: {
          type: 'number',
          maxDecimalPlaces: 2,
          minimum: 0.01,
          maximum: 1_000_000,
          description: 'a number from 0.01 to 1000000 with at most two decimals',
        },
        currency_code: {
          type: 'string',
          pattern: '^[A-Z]{3}$',
          description: 'an ISO 4217 code such as USD',
        },
      },
    },
    products: {
      type: ['array', 'null'],
      minItems: 1,
      maxItems: 10,
      items: { type: 'string', textLength: [1, 200] },
      description: 'a list of 1–10 product ids, each a string of 1–200 characters',
    },
    campaign_id: {
      type: ['string', 'null'],
      pattern: '^[A-Z0-9]{4,20}$',
      description: '4–20 capital letters or digits',
    },
    delivery: {
      type: ['object', 'null'],
      description: 'an object {method}',
      additionalProperties: false,
      required: ['method'],
      properties: {
        method: { enum: [...DELIVERY_METHODS], description: `one of ${DELIVERY_METHODS.join(', ')}` },
      },
    },
    custom_fields: {
      customFieldsShape: true,
      description: 'an object {"<label>": <value>} or a list [{id|label, value}]',
    },
  },
} as const;

const ENVELOPE_PROPERTIES = {
  environment: { enum: ['sandbox', 'production', null], description: 'one of sandbox, production' },
  funding_source_id: {
    type: ['string', 'null'],
    textLength: [1, 200],
    description: 'a string of 1–200 characters',
  },
  external_reference: {
    type: ['string', 'null'],
    textLength: [1, 255],
    description: 'a string of 1–255 characters',
  },
} as const;

/** The whole body. Documentation and the source of the compiled validators; the number of rewards is not capped here. */
export const SEND_REWARDS_BODY_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  $id: 'send-rewards-body',
  type: 'object',
  additionalProperties: false,
  required: ['rewards'],
  properties: {
    ...ENVELOPE_PROPERTIES,
    rewards: {
      type: 'array',
      minItems: 1,
      items: { $ref: '#/definitions/reward' },
      description: 'a list of rewards: at least one, at most the limit given to validateSendBody',
    },
  },
  definitions: { reward: REWARD_SCHEMA },
} as const;

/** At most this many details are collected; validation stops there. */
export const MAX_SEND_BODY_DETAILS = 100;

const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });

ajv.addFormat('email', { type: 'string', validate: (value: string) => isEmail(value, {}) });

ajv.addKeyword({
  keyword: 'textLength',
  type: 'string',
  schemaType: 'array',
  metaSchema: { type: 'array', items: { type: 'integer', minimum: 0 }, minItems: 2, maxItems: 2 },
  compile:
    ([min, max]: [number, number]) =>
    (data: string) =>
      length(data, min, max),
});

ajv.addKeyword({
  keyword: 'maxDecimalPlaces',
  type: 'number',
  schemaType: 'number',
  compile: (max: number) => (data: number) => decimalPlaces(data) <= max,
});

/** ajv reads the errors of a `validate` keyword from the function itself. */
const customFieldsShape: SchemaValidateFunction = (_schema: boolean, data: unknown) => {
  if (data === null) return true; // @IsOptional()
  const problem = customFieldsShapeProblem(data);
  if (problem === null) return true;
  customFieldsShape.errors = [{ keyword: 'customFieldsShape', message: problem, params: { problem } }];
  return false;
};
ajv.addKeyword({
  keyword: 'customFieldsShape',
  schemaType: 'boolean',
  errors: true,
  validate: customFieldsShape,
});

/** As `IsNumber({maxDecimalPlaces})` counts them; `1e-7` (where class-validator throws) has more than any limit. */
function decimalPlaces(value: number): number {
  if (value % 1 === 0) return 0;
  return value.toString().split('.')[1]?.length ?? Number.POSITIVE_INFINITY;
}

ajv.addSchema(SEND_REWARDS_BODY_SCHEMA);
const validateReward: ValidateFunction = (() => {
  const compiled = ajv.getSchema(`${SEND_REWARDS_BODY_SCHEMA.$id}#/definitions/reward`);
  if (!compiled) throw new Error('send-rewards schema: no definition of a reward');
  return compiled;
})();
/** The body without its rewards, which are validated one by one (so that collecting can stop). */
const validateEnvelope = ajv.compile({
  type: 'object',
  additionalProperties: false,
  required: ['rewards'],
  properties: { ...ENVELOPE_PROPERTIES, rewards: { type: 'array', minItems: 1 } },
});

/** Descriptions by the path of a field without indexes (`recipient.email`), for the reasons. */
function descriptions(schema: object, prefix = '', into = new Map<string, string>()): Map<string, string> {
  const s = schema as { description?: string; properties?: Record<string, object> };
  if (s.description) into.set(prefix, s.description);
  for (const [name, child] of Object.entries(s.properties ?? {}))
    descriptions(child, prefix ? `${prefix}.${name}` : name, into);
  return into;
}
const ENVELOPE_DESCRIPTIONS = descriptions({ properties: ENVELOPE_PROPERTIES });
const REWARD_DESCRIPTIONS = descriptions(REWARD_SCHEMA);

/** The pipe's naming (src/common/validation.ts): `parent.name`, or `parent[n]` for a name of digits only. */
function childField(parent: string, name: string): string {
  if (!parent) return name;
  return /^\d+$/.test(name) ? `${parent}[${name}]` : `${parent}.${name}`;
}

/** The segments of a JSON pointer, up to the first array index (class-validator names an array, not its items). */
function pointerSegments(pointer: string): string[] {
  const segments: string[] = [];
  for (const raw of pointer.split('/').slice(1)) {
    if (/^\d+$/.test(raw)) break;
    segments.push(raw.replace(/~1/g, '/').replace(/~0/g, '~'));
  }
  return segments;
}

class Details {
  readonly list: ErrorDetail[] = [];
  private readonly seen = new Set<string>();

  get full(): boolean {
    return this.list.length >= MAX_SEND_BODY_DETAILS;
  }

  add(field: string, reason: string): void {
    if (this.full || this.seen.has(field)) return;
    this.seen.add(field);
    this.list.push({ field, reason });
  }

  /** One detail per field, from ajv's errors for a value at `base` (`''` for the body, `rewards[3]` for a reward). */
  addAjvErrors(errors: ErrorObject[], base: string, described: (key: string) => string | undefined): void {
    for (const error of errors) {
      const segments = pointerSegments(error.instancePath);
      const key = segments.join('.');
      const field = segments.reduce(childField, base);
      switch (error.keyword) {
        case 'additionalProperties': {
          const name = String((error.params as { additionalProperty: string }).additionalProperty);
          const extra = childField(field, name);
          this.add(extra, `property ${extra} is not allowed`);
          break;
        }
        case 'required': {
          const name = String((error.params as { missingProperty: string }).missingProperty);
          const missing = childField(field, name);
          const what = described(key ? `${key}.${name}` : name);
          this.add(missing, what ? `${missing} is required and must be ${what}` : `${missing} is required`);
          break;
        }
        case 'customFieldsShape':
          this.add(field, `${field} ${error.message ?? 'is malformed'}`);
          break;
        default: {
          const what = described(key);
          this.add(field, what ? `${field} must be ${what}` : `${field} is invalid`);
        }
      }
      if (this.full) return;
    }
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Validates a send body (parsed JSON; not modified) as `SendRewardsDto` under the global ValidationPipe would, with at
 * most `maxRewards` rewards. Returns the details of a `validation_failed` error — at most `MAX_SEND_BODY_DETAILS`,
 * one per field — or `[]` when the body is valid. A missing (null/undefined) body is taken as `{}`, as the pipe does.
 * Beyond `maxRewards` rewards, the rewards themselves are not looked at.
 */
export function validateSendBody(body: unknown, maxRewards: number): ErrorDetail[] {
  if (!Number.isSafeInteger(maxRewards) || maxRewards < 1)
    throw new RangeError(`maxRewards must be a positive integer, not ${maxRewards}`);
  const details = new Details();
  const value = body ?? {};
  if (!isObject(value)) {
    details.add('body', 'the request body must be a JSON object');
    return details.list;
  }
  if (!validateEnvelope(value)) {
    details.addAjvErrors(validateEnvelope.errors ?? [], '', (key) =>
      key === 'rewards' ? `a list of 1–${maxRewards} rewards` : ENVELOPE_DESCRIPTIONS.get(key),
    );
  }
  const rewards = value.rewards;
  if (!Array.isArray(rewards) || rewards.length === 0) return details.list;
  if (rewards.length > maxRewards) {
    details.add('rewards', `rewards must contain at most ${maxRewards} rewards (it has ${rewards.length})`);
    return details.list;
  }
  for (let i = 0; i < rewards.length && !details.full; i++) {
    const reward: unknown = rewards[i];
    if (!isObject(reward)) {
      details.add('rewards', 'each item of rewards must be an object (a reward)');
      details.add(`rewards[${i}]`, `rewards[${i}] must be an object (a reward)`);
      continue;
    }
    if (!validateReward(reward)) {
      details.addAjvErrors(validateReward.errors ?? [], `rewards[${i}]`, (key) =>
        REWARD_DESCRIPTIONS.get(key),
      );
    }
  }
  return details.list;
}
