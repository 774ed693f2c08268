import type { ValidationError } from 'class-validator';
import { ValidationPipe } from '@nestjs/common';
import type { ErrorDetail } from './app-error';
import { ValidationFailedError } from './app-error';

/** Flattens class-validator's tree into one detail per bad field, named by its dotted path. */
export function flattenValidationErrors(errors: ValidationError[], parent = ''): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  for (const error of errors) {
    const field = parent
      ? /^\d+$/.test(error.property)
        ? `${parent}[${error.property}]`
        : `${parent}.${error.property}`
      : error.property;
    for (const [constraint, message] of Object.entries(error.constraints ?? {})) {
      details.push({
        field,
        reason:
          constraint === 'whitelistValidation' ? `property ${field} is not allowed` : message.replace(/^\S+ /, `${field} `),
      });
    }
    if (error.children?.length) details.push(...flattenValidationErrors(error.children, field));
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
