import express from 'express';
import type { NextFunction, Request, Response, Router } from 'express';
import { catalogRouter } from './sandbox.catalog';
import type { WebhookDeliveries } from './sandbox.deliveries';
import type { ApiRequest, RouteGuard } from './sandbox.http';
import { apiError } from './sandbox.http';
import type { SandboxAccount } from './sandbox.model';
import { ordersRouter } from './sandbox.orders';
import type { SandboxState } from './sandbox.state';
import { tokenKey } from './sandbox.state';
import { webhooksRouter } from './sandbox.webhooks';

export { apiError } from './sandbox.http';
export type { RouteGuard } from './sandbox.http';

/**
 * `/api/v2`: authenticate (account API key or OAuth access token), apply the per-account rate limit, then the
 * catalog (organizations, fields, funding sources, products, campaigns), the orders and rewards, and the webhooks.
 */
export function apiRouter(state: SandboxState, guard: RouteGuard, deliveries: WebhookDeliveries): Router {
  const router = express.Router();
  router.use((req, res, next) => authenticate(state, req, res, next));
  router.use((req, res, next) => rateLimit(state, req, res, next));
  router.use(catalogRouter(guard));
  router.use(ordersRouter(state, guard, deliveries));
  router.use(webhooksRouter(state, guard, deliveries));
  router.use((req, res) => apiError(res, 404, `No such endpoint: ${req.method} /api/v2${req.path}`));
  router.use(
    (error: { type?: string; status?: number }, _req: Request, res: Response, next: NextFunction) => {
      if (error?.type === 'entity.parse.failed')
        return apiError(res, 400, 'The request body is not valid JSON');
      if (error?.type === 'entity.too.large') return apiError(res, 413, 'The request body is too large');
      next(error);
    },
  );
  return router;
}

function authenticate(state: SandboxState, req: Request, res: Response, next: NextFunction): void {
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  if (!match) return apiError(res, 401, 'You must provide an API key or access token.');
  const presented = match[1];
  const accountId = state.apiKeys.get(presented);
  if (accountId) {
    (req as ApiRequest).caller = {
      account: state.accounts.get(accountId) as SandboxAccount,
      scopes: ['default', 'team_management'],
    };
    return next();
  }
  const token = state.accessTokens.get(tokenKey(presented));
  const grant = token ? state.grants.get(token.grantId) : undefined;
  if (!token || !grant || grant.revoked) return apiError(res, 401, 'The API key you provided is invalid.');
  if (state.now() >= token.expiresAtMs)
    return apiError(res, 401, 'The API key you provided is no longer valid.');
  const account = state.accounts.get(grant.accountId);
  if (!account) return apiError(res, 401, 'The API key you provided is invalid.');
  (req as ApiRequest).caller = { account, scopes: grant.scopes };
  next();
}

/**
 * At most `settings.rateLimitRps` requests per account in any 1-second interval (0 = off). Above it: 429 with the
 * body the service's docs show — singular `error` — and `Retry-After` only when `rateLimitRetryAfter` is set.
 */
function rateLimit(state: SandboxState, req: Request, res: Response, next: NextFunction): void {
  const { account } = (req as ApiRequest).caller;
  if (state.rateLimiter.admit(account.id, state.settings.rateLimitRps)) return next();
  if (state.settings.rateLimitRetryAfter !== undefined)
    res.setHeader('Retry-After', String(state.settings.rateLimitRetryAfter));
  res.status(429).json({ error: { message: 'Too many requests', payload: {} } });
}
