import { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';

export const FIELDS_ERROR_CODES = [
  'fields_unavailable',
  'unknown_custom_field',
  'invalid_custom_field_value',
  'missing_required_custom_field',
  'invalid_custom_fields',
] as const;
export type FieldsErrorCode = (typeof FIELDS_ERROR_CODES)[number];

export class FieldsError extends AppError<FieldsErrorCode> {}

export class FieldsUnavailableError extends FieldsError {
  constructor() {
    super(
      HttpStatus.SERVICE_UNAVAILABLE,
      'fields_unavailable',
      'The rewards service’s custom fields cannot be read right now and no copy is cached; retry shortly.',
      [],
      { 'Retry-After': '5' },
    );
  }
}

/** The message of every custom-field mismatch (the details say which). */
export const CUSTOM_FIELDS_MISMATCH = 'Custom fields do not match the rewards account’s fields; see details.';
