import { HttpStatus } from '@nestjs/common';
import { AppError, type ErrorDetail } from '../common/app-error';
import type { UpstreamErrorCode } from '../rewards-api/rewards-api.errors';

export const TOKEN_VAULT_ERROR_CODES = [
  'connection_not_found',
  'connection_not_active',
  'connection_refresh_backoff',
  'connection_refresh_failed',
  'refresh_lock_timeout',
] as const;
export type TokenVaultErrorCode = (typeof TOKEN_VAULT_ERROR_CODES)[number];

const retryAfter = (seconds?: number): Record<string, string> =>
  seconds === undefined ? {} : { 'Retry-After': String(Math.max(1, Math.ceil(seconds))) };

export class VaultError extends AppError {
  constructor(
    status: HttpStatus,
    code: TokenVaultErrorCode,
    message: string,
    details: ErrorDetail[] = [],
    retryAfterSeconds?: number,
  ) {
    super(status, code, message, details, retryAfter(retryAfterSeconds));
  }
}

export class ConnectionNotActiveError extends VaultError {
  constructor(readonly connectionStatus: string) {
    super(
      HttpStatus.CONFLICT,
      'connection_not_active',
      `The rewards connection is ${connectionStatus}; the tenant must connect again.`,
      [{ field: 'connection.status', reason: connectionStatus }],
    );
  }
}

/** After transient refresh failures the connection cools down: callers get this fast instead of another token call. */
export class RefreshBackoffError extends VaultError {
  constructor(retryAfterSeconds: number) {
    const message = 'Refreshing this connection’s token failed recently; retry after the cooldown.';
    super(HttpStatus.SERVICE_UNAVAILABLE, 'connection_refresh_backoff', message, [], retryAfterSeconds);
  }
}

/** Another instance holds the refresh lock for too long. Retryable; says nothing about the credentials. */
export class RefreshLockTimeoutError extends VaultError {
  constructor() {
    const message = 'The connection’s token is being refreshed elsewhere; retry shortly.';
    super(HttpStatus.SERVICE_UNAVAILABLE, 'refresh_lock_timeout', message, [], 1);
  }
}

export class RefreshFailedError extends VaultError {
  constructor(reason: string, retryAfterSeconds: number) {
    const message = `Refreshing the connection’s token failed: ${reason}.`;
    super(HttpStatus.SERVICE_UNAVAILABLE, 'connection_refresh_failed', message, [], retryAfterSeconds);
  }
}

export class ConnectionNotFoundError extends VaultError {
  /** With the tenant, the message says how to connect one. */
  constructor(environment?: string, tenantId?: string) {
    super(
      HttpStatus.NOT_FOUND,
      'connection_not_found',
      `The tenant has no rewards connection${environment ? ` for ${environment}` : ''}.` +
        (tenantId
          ? ` To connect one, create a connect session (POST /v1/tenants/${tenantId}/connect-sessions)` +
            ' and open its connect_url in a browser.'
          : ''),
    );
  }
}

/**
 * The token endpoint refused the gateway's own client id / secret (`invalid_client`): no tenant's grant is at fault and
 * no connection changes status. Sends answer this until an operator fixes the environment's credentials.
 */
export class AppCredentialsInvalidError extends AppError {
  static readonly CODE: UpstreamErrorCode = 'upstream_app_credentials_invalid';

  constructor(
    readonly environment: string,
    retryAfterSeconds = 60,
  ) {
    super(
      HttpStatus.SERVICE_UNAVAILABLE,
      AppCredentialsInvalidError.CODE,
      `The rewards service rejected this gateway’s app credentials for the ${environment} environment (invalid_client). ` +
        'The tenant’s connection is unaffected; an operator must fix the client id / secret.',
      [{ field: 'environment', reason: `app credentials of ${environment} refused`, environment }],
      retryAfter(retryAfterSeconds),
    );
  }
}
