import { AppError } from '../common/app-error';

export const OPS_ERROR_CODES = ['csrf_failed'] as const;
export type OpsErrorCode = (typeof OPS_ERROR_CODES)[number];

export class OpsError extends AppError<OpsErrorCode> {}
