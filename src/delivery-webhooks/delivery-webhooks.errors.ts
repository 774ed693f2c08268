import { HttpStatus } from '@nestjs/common';
import { AppError } from '../common/app-error';

export const DELIVERY_WEBHOOK_ERROR_CODES = ['webhook_signature_invalid'] as const;
export type DeliveryWebhookErrorCode = (typeof DELIVERY_WEBHOOK_ERROR_CODES)[number];

/** A delivery webhook whose `Tremendous-Webhook-Signature` is missing, malformed or matches no key we hold. */
export class WebhookSignatureInvalidError extends AppError {
  constructor() {
    super(
      HttpStatus.UNAUTHORIZED,
      'webhook_signature_invalid' satisfies DeliveryWebhookErrorCode,
      'The Tremendous-Webhook-Signature header is missing or does not match the body; nothing was recorded.',
    );
  }
}
