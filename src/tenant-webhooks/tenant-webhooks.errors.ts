import { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';
import { MAX_ENDPOINTS_PER_TENANT } from './webhook-events';

/** Every error code the tenant webhooks API answers with (a bad `url` or `events` is `validation_failed`). */
export const TENANT_WEBHOOK_ERROR_CODES = [
  'webhook_endpoint_not_found',
  'webhook_endpoint_limit_reached',
  'webhook_endpoint_disabled',
  'webhook_delivery_not_found',
] as const;
export type TenantWebhookErrorCode = (typeof TENANT_WEBHOOK_ERROR_CODES)[number];

class TenantWebhookError extends AppError<TenantWebhookErrorCode> {}

export const endpointNotFound = (id: string) =>
  new TenantWebhookError(
    HttpStatus.NOT_FOUND,
    'webhook_endpoint_not_found',
    `No webhook endpoint ${JSON.stringify(id)} for this tenant.`,
  );

export const endpointLimitReached = () =>
  new TenantWebhookError(
    HttpStatus.CONFLICT,
    'webhook_endpoint_limit_reached',
    `A tenant may register at most ${MAX_ENDPOINTS_PER_TENANT} webhook endpoints; delete one first.`,
  );

export const endpointDisabled = () =>
  new TenantWebhookError(
    HttpStatus.CONFLICT,
    'webhook_endpoint_disabled',
    'The endpoint is disabled; enable it first (POST …/webhooks/{id}/enable).',
  );

export const deliveryNotFound = (eventId: string) =>
  new TenantWebhookError(
    HttpStatus.NOT_FOUND,
    'webhook_delivery_not_found',
    `The endpoint has no event ${JSON.stringify(eventId)} (delivered and failed events are kept 30 days).`,
  );
