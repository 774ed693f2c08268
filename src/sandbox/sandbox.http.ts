import type { NextFunction, Request, Response } from 'express';
import type { SandboxAccount } from './sandbox.model';

/** The caller of an `/api/v2` request: an account, through an OAuth access token or the account's API key. */
export interface ApiCaller {
  account: SandboxAccount;
  scopes: string[];
}

export type ApiRequest = Request & { caller: ApiCaller };

/** Middleware run first on each named route: counts the call and applies injected faults. */
export type RouteGuard = (route: string) => (req: Request, res: Response, next: NextFunction) => void;

/** `{"errors": {"message", "payload"}}`, the service's error shape; `payload` names the fields in error, or is `{}`. */
export function apiError(
  res: Response,
  status: number,
  message: string,
  payload: Record<string, unknown> = {},
): void {
  res.status(status).json({ errors: { message, payload } });
}

/** A refusal worked out before answering. */
export interface Problem {
  status: number;
  message: string;
  payload: Record<string, unknown>;
}

export function problem(message: string, payload: Record<string, unknown> = {}, status = 400): Problem {
  return { status, message, payload };
}

export function sendProblem(res: Response, p: Problem): void {
  apiError(res, p.status, p.message, p.payload);
}

export function requireScope(scope: string) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!(req as ApiRequest).caller.scopes.includes(scope)) {
      return apiError(res, 403, `This access token does not grant this operation (needs scope "${scope}").`);
    }
    next();
  };
}

/** Query parameter as one string (the last one when repeated), undefined when absent, null when not a string. */
export function queryString(value: unknown): string | undefined | null {
  const v = Array.isArray(value) ? value[value.length - 1] : value;
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : null;
}

/** Parses `offset` / `limit` query parameters; a Problem when malformed or out of range. */
export function paging(
  query: Request['query'],
  defaultLimit: number,
  maxLimit: number,
): { offset: number; limit: number } | Problem {
  const result = { offset: 0, limit: defaultLimit };
  for (const name of ['offset', 'limit'] as const) {
    const raw = queryString(query[name]);
    if (raw === undefined) continue;
    const n = Number(raw);
    const ok =
      raw !== null &&
      /^\d+$/.test(raw) &&
      (name === 'offset' ? n <= Number.MAX_SAFE_INTEGER : n >= 1 && n <= maxLimit);
    if (!ok)
      return problem(`${name} must be a whole number${name === 'limit' ? ` from 1 to ${maxLimit}` : ''}`, {
        [name]: query[name] ?? null,
      });
    result[name] = n;
  }
  return result;
}
