import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import { Catch, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CommonErrorCode, ErrorDetail } from './app-error';
import { AppError } from './app-error';

interface ErrorBody {
  error: { code: string; message: string; details: ErrorDetail[]; request_id?: string };
}

const STATUS_CODES: Record<number, CommonErrorCode> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable_entity',
  429: 'too_many_requests',
};

/** Maps anything thrown to the one JSON error shape. Unknown errors are logged and answered with a generic 500. */
export function toErrorResponse(
  exception: unknown,
  req: Pick<FastifyRequest, 'id' | 'method' | 'url'>,
  logger: Logger,
): { status: number; body: ErrorBody; headers: Record<string, string> } {
  const requestId = String((req as { id?: unknown }).id ?? '');
  if (exception instanceof AppError) {
    return {
      status: exception.status,
      body: { error: { code: exception.code, message: exception.message, details: exception.details } },
      headers: exception.headers,
    };
  }
  const pgCode = String(
    (exception as { driverError?: { code?: unknown } })?.driverError?.code ??
      (exception as { code?: unknown })?.code ??
      '',
  );
  if (INPUT_ERROR_CODES.has(pgCode)) {
    // A backstop: validation should have caught it; the database refusing a value is the caller's input, not a crash.
    logger.warn({ requestId, pgCode }, 'the database refused a value from the request');
    return simple(
      400,
      'invalid_input',
      'A value in the request cannot be stored (invalid characters, format or size).',
    );
  }
  if (isDatabaseUnavailable(exception)) {
    logger.warn({ requestId, err: (exception as Error).message }, 'database unavailable');
    const r = simple(503, 'database_unavailable', 'The database cannot be reached right now; retry shortly.');
    return { ...r, headers: { 'Retry-After': '2' } };
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
      return {
        status,
        body: {
          error: {
            code: 'not_ready' satisfies CommonErrorCode,
            message: 'A dependency is not available.',
            details,
          },
        },
        headers: { 'Retry-After': '2' },
      };
    }
    if (status < 500) {
      const message =
        status === 404
          ? `No route ${req.method} ${req.url.split('?')[0]}.`
          : exception.message || 'The request was rejected.';
      return simple(status, STATUS_CODES[status] ?? 'bad_request', message);
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
  const body = simple(
    500,
    'internal_error',
    'An unexpected error occurred; the request id identifies it in the logs.',
  );
  body.body.error.request_id = requestId;
  return body;
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

/** A lost or refused database connection (restart, failover): a retryable 503, not a 500. */
export function isDatabaseUnavailable(error: unknown): boolean {
  const e = error as {
    code?: unknown;
    message?: unknown;
    driverError?: { code?: unknown; message?: unknown };
  } | null;
  if (!e || typeof e !== 'object') return false;
  const code = String(e.driverError?.code ?? e.code ?? '');
  const message = String(e.driverError?.message ?? e.message ?? '');
  return UNAVAILABLE_CODES.has(code) || UNAVAILABLE_MESSAGES.test(message);
}

function simple(status: number, code: CommonErrorCode, message: string) {
  return {
    status,
    body: { error: { code, message, details: [] as ErrorDetail[] } } as ErrorBody,
    headers: {},
  };
}

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

export { HttpStatus };
