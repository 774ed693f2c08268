import { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';

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

export class DispatchError extends AppError<DispatchErrorCode> {}

const KEY = 'Idempotency-Key';

/** The send route's refusals of an Idempotency-Key, as it answers them and as its documentation shows them. */
export const keyMissing = () =>
  new DispatchError(
    HttpStatus.BAD_REQUEST,
    'idempotency_key_missing',
    'Send an Idempotency-Key header (a unique string per reward request, at most 255 characters).',
    [{ field: KEY, reason: 'required' }],
  );

export const keyInvalid = (reason: string) =>
  new DispatchError(
    HttpStatus.BAD_REQUEST,
    'idempotency_key_invalid',
    'The Idempotency-Key must be 1–255 visible ASCII characters.',
    [{ field: KEY, reason }],
  );

export const keyReused = (dispatchId: string) =>
  new DispatchError(
    HttpStatus.UNPROCESSABLE_ENTITY,
    'idempotency_key_reused',
    'This Idempotency-Key was used with a different request body.',
    [{ field: KEY, reason: 'already used with another body', dispatch_id: dispatchId }],
  );

export const keyInProgress = (dispatchId: string) =>
  new DispatchError(
    HttpStatus.CONFLICT,
    'idempotency_request_in_progress',
    'A request with this Idempotency-Key is still being processed; retry shortly.',
    [{ field: KEY, reason: 'in progress', dispatch_id: dispatchId }],
    { 'Retry-After': '1' },
  );

/** `POST …/dispatches/{id}/cancel` on a dispatch whose every reward is settled (`status`). */
export const notCancellable = (id: string, status: string) =>
  new DispatchError(
    HttpStatus.CONFLICT,
    'dispatch_not_cancellable',
    `Dispatch ${id} is ${status}: every reward is settled, nothing is left to cancel.`,
    [{ field: 'id', reason: `already ${status}` }],
  );
