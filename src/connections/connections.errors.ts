import { AppError } from '../common/app-error';

export const CONNECTION_ERROR_CODES = ['environment_not_configured', 'return_url_not_allowed'] as const;
export type ConnectionErrorCode = (typeof CONNECTION_ERROR_CODES)[number];

export class ConnectionsError extends AppError<ConnectionErrorCode> {}
