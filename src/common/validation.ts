import type { ValidationError } from 'class-validator';
import { ValidationPipe } from '@nestjs/common';
import type { ErrorDetail } from './app-error';
import { ValidationFailedError } from './app-error';

/**
 * Constraints that say what a value *is* (its presence or type) explain a failure better than those about its size or
 * format, which fail along with them (`"name": 5` breaks isString and isLength; the reason is that it is no string).
 */
const TYPE_CONSTRAINTS = [
  'whitelistValidation',
  'isDefined',
  'isNotEmptyObject',
  'isString',
  'isNumber',
  'isInt',
  'isBoolean',
  'isArray',
  'isObject',
  'isIn',
  'isEnum',
  'nestedValidation',
];

/** The one constraint to report for a property: a type constraint first, else the first decorator in source order. */
function mostRelevant(constraints: Record<string, string>): [string, string] | undefined {
  const entries = Object.entries(constraints);
  for (const name of TYPE_CONSTRAINTS) {
    const hit = entries.find(([constraint]) => constraint === name);
    if (hit) return hit;
  }
  // class-validator runs (and lists) a property's decorators bottom-up: the last entry is the topmost decorator.
  return entries.at(-1);
}

/** class-validator names the bare property (`email must be …`, `each value in products …`); name its full path. */
function reasonFor(message: string, property: string, field: string): string {
  if (field === property) return message;
  const each = /^each value in /.exec(message)?.[0] ?? '';
  const rest = message.slice(each.length);
  if (rest.startsWith(`${property} `)) return `${each}${field}${rest.slice(property.length)}`;
  const escaped = property.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return each + rest.replace(new RegExp(`(^|[^\\w.\\[])${escaped}(?![\\w\\]])`), `$1${field}`);
}

/**
 * Flattens class-validator's tree into exactly one detail per bad field, named by its path
 * (`rewards[0].recipient.email`), with the most relevant of the field's failed constraints as the reason.
 */
export function flattenValidationErrors(
  errors: ValidationError[],
  parent = '',
  seen = new Set<string>(),
): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  for (const error of errors) {
    const field = parent
      ? /^\d+$/.test(error.property)
        ? `${parent}[${error.property}]`
        : `${parent}.${error.property}`
      : error.property;
    const chosen = mostRelevant(error.constraints ?? {});
    if (chosen && !seen.has(field)) {
      seen.add(field);
      const [constraint, message] = chosen;
      details.push({
        field,
        reason:
          constraint === 'whitelistValidation'
            ? `property ${field} is not allowed`
            : reasonFor(message, error.property, field),
      });
    }
    if (error.children?.length) details.push(...flattenValidationErrors(error.children, field, seen));
  }
  return details;
}

/** Whitelisting, unknown properties rejected, every bad field named. */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => new ValidationFailedError(flattenValidationErrors(errors)),
  });
}
