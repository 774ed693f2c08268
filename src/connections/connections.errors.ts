import type { HttpStatus } from '@nestjs/common';
import { AppError, type ErrorDetail } from '../common/app-error';

export const CONNECTION_ERROR_CODES = ['environment_not_configured', 'return_url_not_allowed'] as const;
export type ConnectionErrorCode = (typeof CONNECTION_ERROR_CODES)[number];

export class ConnectionsError extends AppError {
  constructor(status: HttpStatus, code: ConnectionErrorCode, message: string, details: ErrorDetail[] = []) {
    super(status, code, message, details);
  }
}
