import type { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';

/** Every error code the tenant webhooks API answers with (a bad `url` or `events` is `validation_failed`). */
export const TENANT_WEBHOOK_ERROR_CODES = [
  'webhook_endpoint_not_found',
  'webhook_endpoint_limit_reached',
  'webhook_endpoint_disabled',
  'webhook_delivery_not_found',
] as const;
export type TenantWebhookErrorCode = (typeof TENANT_WEBHOOK_ERROR_CODES)[number];

export class TenantWebhookError extends AppError {
  constructor(status: HttpStatus, code: TenantWebhookErrorCode, message: string) {
    super(status, code, message);
  }
}
