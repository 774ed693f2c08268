import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import { Catch, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, COMMON_ERROR_CODES, type CommonErrorCode, type ErrorDetail } from './app-error';

interface ErrorAnswer {
  status: number;
  body: { error: { code: string; message: string; details: ErrorDetail[]; request_id?: string } };
  headers: Record<string, string>;
}

const answer = (
  status: number,
  code: string,
  message: string,
  details: ErrorDetail[] = [],
  headers: Record<string, string> = {},
): ErrorAnswer => ({ status, body: { error: { code, message, details } }, headers });

/** A pg error, or a wrapper of one (`driverError`). */
type DriverError = { code?: unknown; message?: unknown; driverError?: DriverError };

const RETRY_SOON = { 'Retry-After': '2' };

/** A 4xx's code: its status's name (`HttpStatus.NOT_FOUND`: `not_found`) when that is one of ours. */
function codeOf(status: number): CommonErrorCode {
  const name = (HttpStatus[status] ?? '').toLowerCase() as CommonErrorCode;
  return COMMON_ERROR_CODES.includes(name) ? name : 'bad_request';
}

/** Maps anything thrown to the one JSON error shape. Unknown errors are logged and answered with a generic 500. */
export function toErrorResponse(
  exception: unknown,
  req: Pick<FastifyRequest, 'id' | 'method' | 'url'>,
  logger: Logger,
): ErrorAnswer {
  const requestId = String((req as { id?: unknown }).id ?? '');
  if (exception instanceof AppError) {
    const { status, code, message, details, headers } = exception;
    return answer(status, code, message, details, headers);
  }
  const db = exception as DriverError | null | undefined;
  const pgCode = String(db?.driverError?.code ?? db?.code ?? '');
  const dbMessage = String(db?.driverError?.message ?? db?.message ?? '');
  if (INPUT_ERROR_CODES.has(pgCode)) {
    // A backstop: validation should have caught it; the database refusing a value is the caller's input, not a crash.
    logger.warn({ requestId, pgCode }, 'the database refused a value from the request');
    return answer(
      400,
      'invalid_input',
      'A value in the request cannot be stored (invalid characters, format or size).',
    );
  }
  // A lost or refused database connection (restart, failover): a retryable 503, not a 500.
  if (UNAVAILABLE_CODES.has(pgCode) || UNAVAILABLE_MESSAGES.test(dbMessage)) {
    logger.warn({ requestId, err: (exception as Error).message }, 'database unavailable');
    const message = 'The database cannot be reached right now; retry shortly.';
    return answer(503, 'database_unavailable', message, [], RETRY_SOON);
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    if (status === 503) {
      // Readiness (terminus) reports which checks failed; keep them, in the one error shape.
      const response = exception.getResponse() as {
        error?: Record<string, { status?: string; message?: string }>;
      };
      const details = Object.entries(response?.error ?? {}).map(([check, r]) => ({
        field: check,
        reason: r?.message ?? r?.status ?? 'down',
      }));
      return answer(status, 'not_ready', 'A dependency is not available.', details, RETRY_SOON);
    }
    if (status < 500) {
      const message =
        status === 404
          ? `No route ${req.method} ${req.url.split('?')[0]}.`
          : exception.message || 'The request was rejected.';
      return answer(status, codeOf(status), message);
    }
  }
  logger.error(
    {
      err:
        exception instanceof Error
          ? { name: exception.name, message: exception.message, stack: exception.stack }
          : String(exception),
      requestId,
    },
    'unhandled error',
  );
  const internal = answer(
    500,
    'internal_error',
    'An unexpected error occurred; the request id identifies it in the logs.',
  );
  internal.body.error.request_id = requestId;
  return internal;
}

/** Postgres data exceptions caused by input: NUL or unencodable characters, bad text representation, out of range. */
const INPUT_ERROR_CODES = new Set([
  '23502',
  '22021',
  '22P05',
  '22P02',
  '22003',
  '22001',
  '22007',
  '22008',
  '54000',
]);

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
  '53300',
]);
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|connection is closed|the database system is (starting up|shutting down)/i;

@Catch()
export class HttpExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpExceptionFilter');

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<FastifyRequest>();
    const res = ctx.getResponse<FastifyReply>();
    const { status, body, headers } = toErrorResponse(exception, req, this.logger);
    if (res.sent || res.raw.headersSent) {
      res.raw.end();
      return;
    }
    res.code(status).headers(headers).send(body);
  }
}
