import { HttpStatus } from '@nestjs/common';

export interface ErrorDetail {
  /** Dotted path of the offending input (`rewards[0].recipient.email`, a header or a query parameter). */
  field?: string;
  reason: string;
  [extra: string]: unknown;
}

/**
 * The one error shape every module throws. `code` is a stable snake_case identifier platforms can switch on; the
 * global filter turns it into `{"error": {"code", "message", "details"}}` with `status`. Abstract: each module throws
 * its own subclass, `AppError<ItsErrorCode>`, which takes only the codes that module declares in its `*_ERROR_CODES`
 * list (the error table in docs/api.md is checked against those lists by a test). Messages never contain a token, key
 * or secret.
 */
export abstract class AppError<Code extends string = string> extends Error {
  constructor(
    readonly status: HttpStatus,
    readonly code: Code,
    message: string,
    readonly details: ErrorDetail[] = [],
    /** Extra response headers (e.g. Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

/** Codes of the HTTP layer itself: input that never reached a module, and the filter's own answers. */
export const COMMON_ERROR_CODES = [
  'validation_failed',
  'invalid_json',
  'invalid_input',
  'invalid_characters',
  'bad_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'method_not_allowed',
  'not_acceptable',
  'conflict',
  'payload_too_large',
  'unsupported_media_type',
  'unprocessable_entity',
  'too_many_requests',
  'database_unavailable',
  'not_ready',
  'internal_error',
] as const;
export type CommonErrorCode = (typeof COMMON_ERROR_CODES)[number];

export class CommonError extends AppError<CommonErrorCode> {}

export class ValidationFailedError extends CommonError {
  constructor(details: ErrorDetail[], message = 'The request is invalid; see details for each field.') {
    super(HttpStatus.BAD_REQUEST, 'validation_failed', message, details);
  }
}

/** A URL the router cannot decode (a malformed percent-encoding, anywhere in its path). */
export function undecodableUrlError(): CommonError {
  return new CommonError(400, 'bad_request', 'The request URL cannot be decoded.', [
    { field: 'path', reason: 'a malformed percent-encoding' },
  ]);
}

/** A NUL character where one cannot be stored (Postgres text), named by where it was found (`query.q`, `body.csrf`). */
export function nulCharacterError(field: string): CommonError {
  return new CommonError(400, 'invalid_characters', 'The request contains a NUL character.', [
    { field, reason: 'contains a NUL (\\u0000) character' },
  ]);
}
