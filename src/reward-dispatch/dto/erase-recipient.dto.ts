import { Injectable, type PipeTransform } from '@nestjs/common';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import type { FromSchema } from 'json-schema-to-ts';
import { type ErrorDetail, ValidationFailedError } from '../../common/app-error';
import { EMAIL, PHONE } from './send-rewards.dto';

/** The body of `POST /v1/tenants/{tenant}/recipients/erase`: exactly one of `email` and `phone`. */
export const ERASE_RECIPIENT_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    email: { ...EMAIL, description: 'The recipient’s e-mail address (compared in lower case).' },
    phone: {
      ...PHONE,
      description: 'The recipient’s phone number (compared by its digits and leading +).',
    },
  },
} as const;

export type EraseRecipientDto = FromSchema<typeof ERASE_RECIPIENT_BODY_SCHEMA>;

const ajv = new Ajv({ strict: true, allErrors: true });
addFormats(ajv, ['email']);
const validate = ajv.compile<EraseRecipientDto>(ERASE_RECIPIENT_BODY_SCHEMA);

/** The details of a refused body (each bad field named once), or none. */
export function eraseBodyProblems(body: unknown): ErrorDetail[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return [{ field: 'body', reason: 'must be a JSON object with email or phone' }];
  const problems: ErrorDetail[] = [];
  if (!validate(body))
    for (const e of validate.errors ?? []) {
      if (e.keyword === 'additionalProperties') {
        const name = (e.params as { additionalProperty: string }).additionalProperty;
        problems.push({ field: name, reason: `${name} is not a property of this body (email or phone)` });
      } else {
        const name = e.instancePath.slice(1);
        const rule = (ERASE_RECIPIENT_BODY_SCHEMA.properties as Record<string, { title: string }>)[name]
          ?.title;
        problems.push({ field: name, reason: `${name} must be ${rule ?? 'valid'}` });
      }
    }
  const given = ['email', 'phone'].filter((k) => k in body);
  if (given.length !== 1)
    problems.push({ field: 'email', reason: 'name the recipient by exactly one of email and phone' });
  return problems;
}

/** Validates the erase body against its schema (ajv); a refused body answers `validation_failed` naming the fields. */
@Injectable()
export class EraseBodyPipe implements PipeTransform<unknown, EraseRecipientDto> {
  transform(body: unknown): EraseRecipientDto {
    const problems = eraseBodyProblems(body);
    if (problems.length) throw new ValidationFailedError(problems);
    return body as EraseRecipientDto;
  }
}
