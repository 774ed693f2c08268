import { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';
import type { ApiKeyScope } from './auth/principal';

export const TENANT_ERROR_CODES = [
  'tenant_not_found',
  'tenant_exists',
  'missing_api_key',
  'invalid_api_key',
  'operator_key_required',
  'insufficient_scope',
  'api_key_not_found',
  'api_key_already_rotated',
  'too_many_failed_authentications',
] as const;
export type TenantErrorCode = (typeof TENANT_ERROR_CODES)[number];

export class TenantsError extends AppError<TenantErrorCode> {}

export class TenantNotFoundError extends TenantsError {
  constructor(id: string) {
    super(HttpStatus.NOT_FOUND, 'tenant_not_found', `No tenant ${JSON.stringify(id)}.`);
  }
}

export const tenantExists = (id: string) =>
  new TenantsError(
    HttpStatus.CONFLICT,
    'tenant_exists',
    `A tenant with id ${JSON.stringify(id)} already exists.`,
    [{ field: 'id', reason: 'already taken' }],
  );

export const apiKeyNotFound = (keyId: string) =>
  new TenantsError(HttpStatus.NOT_FOUND, 'api_key_not_found', `No active API key ${keyId} for this tenant.`);

export const apiKeyAlreadyRotated = (keyId: string, successorId: string | null) =>
  new TenantsError(
    HttpStatus.CONFLICT,
    'api_key_already_rotated',
    `API key ${keyId} was already rotated; rotate its successor instead.`,
    [{ field: 'keyId', reason: 'already rotated', successor_id: successorId }],
  );

/** A tenant key that holds none of the scopes a route accepts; names what is missing (and what the key holds). */
export class InsufficientScopeError extends TenantsError {
  constructor(required: readonly ApiKeyScope[], held: readonly ApiKeyScope[]) {
    const message =
      required.length === 1
        ? `This API key lacks the ${required[0]} scope this operation needs.`
        : `This API key lacks a scope this operation needs: one of ${required.join(', ')}.`;
    super(HttpStatus.FORBIDDEN, 'insufficient_scope', message, [
      { field: 'scopes', reason: message, required_scopes: [...required], key_scopes: [...held] },
    ]);
  }
}
