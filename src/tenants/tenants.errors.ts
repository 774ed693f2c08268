import { HttpStatus } from '@nestjs/common';
import { AppError, type ErrorDetail } from '../common/app-error';

export const TENANT_ERROR_CODES = [
  'tenant_not_found',
  'tenant_exists',
  'missing_api_key',
  'invalid_api_key',
  'operator_key_required',
  'api_key_not_found',
  'too_many_failed_authentications',
] as const;
export type TenantErrorCode = (typeof TENANT_ERROR_CODES)[number];

export class TenantsError extends AppError {
  constructor(
    status: HttpStatus,
    code: TenantErrorCode,
    message: string,
    details: ErrorDetail[] = [],
    headers: Record<string, string> = {},
  ) {
    super(status, code, message, details, headers);
  }
}

export class TenantNotFoundError extends TenantsError {
  constructor(id: string) {
    super(HttpStatus.NOT_FOUND, 'tenant_not_found', `No tenant ${JSON.stringify(id)}.`);
  }
}
