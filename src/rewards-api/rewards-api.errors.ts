import { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';

/**
 * What a call to the rewards service can end in, besides success. `kind` drives every decision upstream:
 * - `invalid_grant`: the refresh token is used or revoked — only a new consent helps;
 * - `invalid_client`: the gateway's own app credentials were refused — an operator must fix them;
 * - `rejected`: a definitive 4xx answer (the request itself is wrong);
 * - `unauthorized`: 401 on an API call (expired or revoked access token);
 * - `transient`: 429, 5xx, a timeout or a network error — worth retrying later. `outcomeUnknown` is true when the
 *   request may have reached the service (a timeout or a dropped connection after sending).
 */
export type RewardsApiErrorKind =
  'invalid_grant' | 'invalid_client' | 'rejected' | 'unauthorized' | 'transient';

export class RewardsApiError extends Error {
  constructor(
    readonly kind: RewardsApiErrorKind,
    message: string,
    readonly status: number | null = null,
    /** The service's error body (never contains our secrets; may echo the offending payload). */
    readonly body: unknown = null,
    readonly retryAfterSeconds: number | null = null,
    readonly outcomeUnknown = false,
  ) {
    super(message);
    this.name = 'RewardsApiError';
  }
}

/** The gateway's error codes for what the rewards service answered. */
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

/** A RewardsApiError in the gateway's terms. */
export interface UpstreamFailure {
  code: UpstreamErrorCode;
  /** Worth retrying later (429, 5xx, timeouts); false for definitive answers. */
  retryable: boolean;
  /** The status the gateway answers with when it surfaces this failure directly. */
  httpStatus: number;
  message: string;
  upstreamStatus: number | null;
  /** The service's `errors.payload`: the offending fields, mirroring the request. */
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

/**
 * The one place where an answer of the rewards service becomes one of our error codes. `what` names the operation
 * in messages ("the order", "the listing").
 */
export function mapUpstreamError(error: RewardsApiError, what = 'the request'): UpstreamFailure {
  const base = {
    upstreamStatus: error.status,
    upstreamPayload: upstreamPayloadOf(error.body),
    retryAfterSeconds: error.retryAfterSeconds,
    outcomeUnknown: error.outcomeUnknown,
  };
  if (error.kind === 'invalid_client') {
    return {
      ...base,
      code: 'upstream_app_credentials_invalid',
      retryable: true,
      httpStatus: HttpStatus.SERVICE_UNAVAILABLE,
      message:
        'The rewards service rejected the gateway’s own app credentials for this environment (invalid_client); an operator must fix them.',
    };
  }
  if (error.kind === 'transient') {
    if (error.status === 429) {
      return {
        ...base,
        code: 'upstream_rate_limited',
        retryable: true,
        httpStatus: HttpStatus.SERVICE_UNAVAILABLE,
        message: `The rewards service is rate-limiting this account (429) for ${what}; retried later.`,
      };
    }
    return {
      ...base,
      code: 'upstream_unavailable',
      retryable: true,
      httpStatus: HttpStatus.SERVICE_UNAVAILABLE,
      message: `The rewards service did not complete ${what}: ${error.message}`,
    };
  }
  if (error.status === 402) {
    return {
      ...base,
      code: 'insufficient_funds',
      retryable: false,
      httpStatus: HttpStatus.UNPROCESSABLE_ENTITY,
      message: 'The funding source does not hold enough funds for this order.',
    };
  }
  if (error.status === 409) {
    return {
      ...base,
      code: 'external_id_conflict',
      retryable: false,
      httpStatus: HttpStatus.UNPROCESSABLE_ENTITY,
      message: 'The rewards service holds a different order with this external_id.',
    };
  }
  if (error.status === 404) {
    return {
      ...base,
      code: 'upstream_not_found',
      retryable: false,
      httpStatus: HttpStatus.NOT_FOUND,
      message: `The rewards service does not know ${what}: ${error.message}`,
    };
  }
  return {
    ...base,
    code: 'upstream_rejected',
    retryable: false,
    httpStatus: HttpStatus.UNPROCESSABLE_ENTITY,
    message: `The rewards service rejected ${what}: ${error.message}`,
  };
}

/** An upstream failure surfaced directly to our caller, with our error shape. */
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
  return new UpstreamError(
    failure,
    !failure.retryable && failure.code === 'upstream_rejected' && rejectedStatus
      ? rejectedStatus
      : failure.httpStatus,
  );
}
