import { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';

/**
 * A failed call to the rewards service. `invalid_grant`: refresh token used or revoked (only a new consent helps);
 * `invalid_client`: our app credentials refused; `rejected`: a definitive 4xx; `unauthorized`: 401 on an API call;
 * `transient`: 429, 5xx, timeout, network — `outcomeUnknown` when the request may have reached the service.
 */
export type RewardsApiErrorKind =
  'invalid_grant' | 'invalid_client' | 'rejected' | 'unauthorized' | 'transient';

export class RewardsApiError extends Error {
  constructor(
    readonly kind: RewardsApiErrorKind,
    message: string,
    readonly status: number | null = null,
    readonly body: unknown = null,
    readonly retryAfterSeconds: number | null = null,
    readonly outcomeUnknown = false,
  ) {
    super(message);
    this.name = 'RewardsApiError';
  }
}

export const UPSTREAM_ERROR_CODES = [
  'upstream_unavailable',
  'upstream_rate_limited',
  'upstream_rejected',
  'upstream_not_found',
  'insufficient_funds',
  'external_id_conflict',
  'upstream_app_credentials_invalid',
] as const;
export type UpstreamErrorCode = (typeof UPSTREAM_ERROR_CODES)[number];

export interface UpstreamFailure {
  code: UpstreamErrorCode;
  retryable: boolean;
  httpStatus: number;
  message: string;
  upstreamStatus: number | null;
  upstreamPayload: unknown;
  retryAfterSeconds: number | null;
  outcomeUnknown: boolean;
}

/** The service's error message: `{"errors": {"message"}}`, or `{"error": {"message"}}` (its 429s), or `{"error": "code"}`. */
export function upstreamMessage(body: unknown): string | undefined {
  const b = body as { errors?: { message?: unknown }; error?: unknown } | null;
  if (typeof b?.errors?.message === 'string') return b.errors.message;
  const single = b?.error as { message?: unknown } | string | undefined;
  if (typeof single === 'string') return single;
  if (typeof single?.message === 'string') return single.message;
  return undefined;
}

function upstreamPayloadOf(body: unknown): unknown {
  const b = body as { errors?: { payload?: unknown }; error?: { payload?: unknown } } | null;
  return b?.errors?.payload ?? (typeof b?.error === 'object' ? b?.error?.payload : undefined) ?? null;
}

/** The one place where an answer of the rewards service becomes one of our error codes; `what` names the operation. */
export function mapUpstreamError(error: RewardsApiError, what = 'the request'): UpstreamFailure {
  const failure = (code: UpstreamErrorCode, httpStatus: number, message: string): UpstreamFailure => ({
    code,
    retryable: httpStatus === HttpStatus.SERVICE_UNAVAILABLE,
    httpStatus,
    message,
    upstreamStatus: error.status,
    upstreamPayload: upstreamPayloadOf(error.body),
    retryAfterSeconds: error.retryAfterSeconds,
    outcomeUnknown: error.outcomeUnknown,
  });
  if (error.kind === 'invalid_client')
    return failure(
      'upstream_app_credentials_invalid',
      HttpStatus.SERVICE_UNAVAILABLE,
      'The rewards service rejected the gateway’s own app credentials for this environment (invalid_client); an operator must fix them.',
    );
  if (error.kind === 'transient')
    return error.status === 429
      ? failure(
          'upstream_rate_limited',
          HttpStatus.SERVICE_UNAVAILABLE,
          `The rewards service is rate-limiting this account (429) for ${what}; retried later.`,
        )
      : failure(
          'upstream_unavailable',
          HttpStatus.SERVICE_UNAVAILABLE,
          `The rewards service did not complete ${what}: ${error.message}`,
        );
  if (error.status === 402)
    return failure(
      'insufficient_funds',
      HttpStatus.UNPROCESSABLE_ENTITY,
      'The funding source does not hold enough funds for this order.',
    );
  if (error.status === 409)
    return failure(
      'external_id_conflict',
      HttpStatus.UNPROCESSABLE_ENTITY,
      'The rewards service holds a different order with this external_id.',
    );
  if (error.status === 404)
    return failure(
      'upstream_not_found',
      HttpStatus.NOT_FOUND,
      `The rewards service does not know ${what}: ${error.message}`,
    );
  return failure(
    'upstream_rejected',
    HttpStatus.UNPROCESSABLE_ENTITY,
    `The rewards service rejected ${what}: ${error.message}`,
  );
}

export class UpstreamError extends AppError {
  constructor(
    readonly failure: UpstreamFailure,
    httpStatus = failure.httpStatus,
  ) {
    super(
      httpStatus,
      failure.code,
      failure.message,
      failure.upstreamStatus !== null || failure.upstreamPayload !== null
        ? [
            {
              field: 'upstream',
              reason: failure.message,
              upstream_status: failure.upstreamStatus,
              upstream_payload: failure.upstreamPayload,
            },
          ]
        : [],
      failure.retryable
        ? { 'Retry-After': String(Math.max(1, Math.ceil(failure.retryAfterSeconds ?? 2))) }
        : {},
    );
  }
}

/** `error` as our AppError. A definitive rejection answers `rejectedStatus` (422 for sends, 502 for reads). */
export function upstreamAppError(
  error: RewardsApiError,
  what: string,
  rejectedStatus?: number,
): UpstreamError {
  const failure = mapUpstreamError(error, what);
  return new UpstreamError(failure, failure.code === 'upstream_rejected' ? rejectedStatus : undefined);
}
