import type { HttpStatus } from '@nestjs/common';
import { AppError, type ErrorDetail } from '../common/app-error';

/** Every error code the send API answers with, besides the upstream's (rewards-api) and the vault's. */
export const DISPATCH_ERROR_CODES = [
  'idempotency_key_missing',
  'idempotency_key_invalid',
  'idempotency_key_reused',
  'idempotency_request_in_progress',
  'dispatch_not_found',
  'dispatch_cancelled',
  'dispatch_not_cancellable',
  'order_failed',
  'order_rejected',
] as const;
export type DispatchErrorCode = (typeof DISPATCH_ERROR_CODES)[number];

export class DispatchError extends AppError {
  constructor(
    status: HttpStatus,
    code: DispatchErrorCode,
    message: string,
    details: ErrorDetail[] = [],
    headers: Record<string, string> = {},
  ) {
    super(status, code, message, details, headers);
  }
}
