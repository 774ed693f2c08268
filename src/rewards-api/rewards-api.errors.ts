/**
 * What a call to the rewards service can end in, besides success. `kind` drives every decision upstream:
 * - `invalid_grant`: the refresh token is used or revoked — only a new consent helps;
 * - `rejected`: a definitive 4xx answer (the request itself is wrong);
 * - `unauthorized`: 401 on an API call (expired or revoked access token);
 * - `transient`: 429, 5xx, a timeout or a network error — worth retrying later. `outcomeUnknown` is true when the
 *   request may have reached the service (a timeout or a dropped connection after sending).
 */
export type RewardsApiErrorKind = 'invalid_grant' | 'invalid_client' | 'rejected' | 'unauthorized' | 'transient';

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
