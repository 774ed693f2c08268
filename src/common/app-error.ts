import { HttpStatus } from '@nestjs/common';

export interface ErrorDetail {
  /** Dotted path of the offending input (`rewards[0].recipient.email`, a header or a query parameter). */
  field?: string;
  reason: string;
  [extra: string]: unknown;
}

/**
 * The one error every module throws. `code` is a stable snake_case identifier platforms can switch on; the
 * global filter turns it into `{"error": {"code", "message", "details"}}` with `status`.
 * Messages must never contain a token, key or secret.
 */
export class AppError extends Error {
  constructor(
    readonly status: HttpStatus,
    readonly code: string,
    message: string,
    readonly details: ErrorDetail[] = [],
    /** Extra response headers (e.g. Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export class ValidationFailedError extends AppError {
  constructor(details: ErrorDetail[], message = 'The request is invalid; see details for each field.') {
    super(HttpStatus.BAD_REQUEST, 'validation_failed', message, details);
  }
}

export class NotFoundError extends AppError {
  constructor(code: string, message: string) {
    super(HttpStatus.NOT_FOUND, code, message);
  }
}
