import express from 'express';
import type { NextFunction, Request, Response, Router } from 'express';
import type { SandboxAccount, SandboxOrder, SandboxReward, SandboxState } from './sandbox.state';
import { randomId, serviceTimestamp, sha256 } from './sandbox.state';
import { canonicalJson } from '../common/canonical-json';

/** The caller of an `/api/v2` request: an account, through an OAuth access token or the account's API key. */
interface ApiCaller {
  account: SandboxAccount;
  scopes: string[];
}

type ApiRequest = Request & { caller: ApiCaller };

/** `{"errors": {"message", "payload"}}`, the service's error shape. */
export function apiError(res: Response, status: number, message: string, payload?: Record<string, unknown>): void {
  res.status(status).json({ errors: { message, ...(payload ? { payload } : {}) } });
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const MAX_REWARDS_PER_ORDER = 100;

/** Middleware run first on each named route: counts the call and applies injected faults. */
export type RouteGuard = (route: string) => (req: Request, res: Response, next: NextFunction) => void;

export function apiRouter(state: SandboxState, guard: RouteGuard): Router {
  const router = express.Router();
  router.use((req, res, next) => authenticate(state, req, res, next));
  router.get('/organizations', guard('organizations'), (req, res) => {
    const { account } = (req as ApiRequest).caller;
    res.json({ organizations: [{ id: `org_${account.id}`, name: account.name, status: 'ACTIVE' }] });
  });
  router.get('/fields', guard('fields'), requireScope('default'), (req, res) => {
    res.json({ fields: (req as ApiRequest).caller.account.fields });
  });
  router.post('/orders', guard('orders'), requireScope('default'), express.json({ limit: '1mb' }), (req, res) =>
    createOrder(state, req as ApiRequest, res),
  );
  router.get('/rewards', guard('rewards'), requireScope('default'), (req, res) => listRewards(req as ApiRequest, res));
  router.get('/rewards/:id', guard('reward'), requireScope('default'), (req, res) => {
    const reward = (req as ApiRequest).caller.account.rewardsById.get(String(req.params.id));
    if (!reward) return apiError(res, 404, 'Reward not found', { id: req.params.id });
    res.json({ reward });
  });
  router.use((req, res) => apiError(res, 404, `No such endpoint: ${req.method} /api/v2${req.path}`));
  router.use((error: { type?: string; status?: number }, _req: Request, res: Response, next: NextFunction) => {
    if (error?.type === 'entity.parse.failed') return apiError(res, 400, 'The request body is not valid JSON');
    if (error?.type === 'entity.too.large') return apiError(res, 413, 'The request body is too large');
    next(error);
  });
  return router;
}

function authenticate(state: SandboxState, req: Request, res: Response, next: NextFunction): void {
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  if (!match) return apiError(res, 401, 'You must provide an API key or access token.');
  const presented = match[1];
  const accountId = state.apiKeys.get(presented);
  if (accountId) {
    (req as ApiRequest).caller = { account: state.accounts.get(accountId) as SandboxAccount, scopes: ['default', 'team_management'] };
    return next();
  }
  const token = state.accessTokens.get(presented);
  const grant = token ? state.grants.get(token.grantId) : undefined;
  if (!token || !grant || grant.revoked) return apiError(res, 401, 'The API key you provided is invalid.');
  if (state.now() >= token.expiresAtMs) return apiError(res, 401, 'The API key you provided is no longer valid.');
  const account = state.accounts.get(grant.accountId);
  if (!account) return apiError(res, 401, 'The API key you provided is invalid.');
  (req as ApiRequest).caller = { account, scopes: grant.scopes };
  next();
}

function requireScope(scope: string) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!(req as ApiRequest).caller.scopes.includes(scope)) {
      return apiError(res, 403, `This access token does not grant this operation (needs scope "${scope}").`);
    }
    next();
  };
}

type Problem = { status: number; message: string; payload: Record<string, unknown> };

function validateOrder(account: SandboxAccount, body: Record<string, unknown>): Problem | null {
  const bad = (message: string, payload: Record<string, unknown>, status = 400): Problem => ({ status, message, payload });
  const payment = body.payment as Record<string, unknown> | undefined;
  const fsId = payment && typeof payment === 'object' ? payment.funding_source_id : undefined;
  if (typeof fsId !== 'string' || !fsId) return bad('payment.funding_source_id is required', { payment: payment ?? null });
  if (!account.fundingSources.has(fsId)) return bad('Funding source not found', { payment: { funding_source_id: fsId } });
  if (body.external_id !== undefined && (typeof body.external_id !== 'string' || body.external_id.length === 0 || body.external_id.length > 128)) {
    return bad('external_id must be a string of 1 to 128 characters', { external_id: body.external_id });
  }
  const rewards = body.rewards;
  if (!Array.isArray(rewards) || rewards.length === 0) return bad('rewards must be a non-empty array', { rewards: rewards ?? null });
  if (rewards.length > MAX_REWARDS_PER_ORDER) return bad(`An order holds at most ${MAX_REWARDS_PER_ORDER} rewards`, { rewards: rewards.length });
  const fieldsById = new Map(account.fields.map((f) => [f.id, f]));
  for (const [i, raw] of rewards.entries()) {
    const r = (raw ?? {}) as Record<string, unknown>;
    const value = (r.value ?? {}) as Record<string, unknown>;
    const recipient = (r.recipient ?? {}) as Record<string, unknown>;
    const at = (field: string, v: unknown) => ({ [`rewards[${i}].${field}`]: v ?? null });
    if (typeof value.denomination !== 'number' || !Number.isFinite(value.denomination) || value.denomination <= 0) {
      return bad('value.denomination must be a positive number', at('value.denomination', value.denomination));
    }
    if (Math.round(value.denomination * 100) !== value.denomination * 100) {
      return bad('value.denomination has more than two decimals', at('value.denomination', value.denomination));
    }
    const currency = value.currency_code ?? 'USD';
    if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency)) return bad('value.currency_code must be an ISO 4217 code', at('value.currency_code', currency));
    if (typeof recipient.name !== 'string' || !recipient.name.trim() || recipient.name.length > 255) {
      return bad('recipient.name is required', at('recipient.name', recipient.name));
    }
    if (typeof recipient.email !== 'string' || !EMAIL.test(recipient.email) || recipient.email.length > 254) {
      return bad('recipient.email is not a valid e-mail address', at('recipient.email', recipient.email));
    }
    const delivery = (r.delivery ?? {}) as Record<string, unknown>;
    if (delivery.method !== 'EMAIL') return bad('delivery.method must be EMAIL', at('delivery.method', delivery.method));
    if (!Array.isArray(r.products) || r.products.length === 0) return bad('products must be a non-empty array of product ids', at('products', r.products));
    for (const productId of r.products) {
      const product = typeof productId === 'string' ? account.products.get(productId) : undefined;
      if (!product) return bad('Product not found', at('products', productId));
      if (!product.currency_codes.includes(currency)) return bad(`Product ${product.id} is not available in ${currency}`, at('value.currency_code', currency), 422);
      if (value.denomination < product.min_denomination || value.denomination > product.max_denomination) {
        return bad(`Denomination must be between ${product.min_denomination} and ${product.max_denomination} for ${product.id}`, at('value.denomination', value.denomination), 422);
      }
    }
    const custom = r.custom_fields ?? [];
    if (!Array.isArray(custom)) return bad('custom_fields must be an array', at('custom_fields', custom));
    const seen = new Set<string>();
    for (const [j, cf] of custom.entries()) {
      const c = (cf ?? {}) as Record<string, unknown>;
      const field = typeof c.id === 'string' ? fieldsById.get(c.id) : undefined;
      if (!field) return bad('Custom field not found', at(`custom_fields[${j}].id`, c.id));
      if (seen.has(field.id)) return bad('Custom field given twice', at(`custom_fields[${j}].id`, c.id));
      seen.add(field.id);
      if (typeof c.value !== 'string') return bad('Custom field value must be a string', at(`custom_fields[${j}].value`, c.value));
      if (field.data_type === 'Dropdown' && !field.data.options.includes(c.value)) {
        return bad(`Value is not one of the options of ${field.label}: ${field.data.options.join(', ')}`, at(`custom_fields[${j}].value`, c.value));
      }
    }
    for (const field of account.fields) {
      if (field.required && !seen.has(field.id)) return bad(`Custom field ${field.label} is required`, at('custom_fields', { id: field.id, label: field.label }));
    }
  }
  return null;
}

function createOrder(state: SandboxState, req: ApiRequest, res: Response): void {
  const { account } = req.caller;
  const body = (req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? req.body : null) as Record<string, unknown> | null;
  if (!body) return apiError(res, 400, 'The request body must be a JSON object');
  const problem = validateOrder(account, body);
  if (problem) return apiError(res, problem.status, problem.message, problem.payload);
  const externalId = body.external_id as string | undefined;
  const { external_id: _ignored, ...withoutExternalId } = body;
  const payloadHash = sha256(canonicalJson(withoutExternalId));
  if (externalId !== undefined) {
    const existing = account.ordersByExternalId.get(externalId);
    if (existing) {
      if (existing.payloadHash !== payloadHash) {
        return apiError(res, 409, 'An order with this external_id already exists with a different payload', { external_id: externalId });
      }
      res.status(201).json({ order: existing.order }); // the original order; nothing created
      return;
    }
  }
  const rewardsIn = body.rewards as Record<string, any>[]; // eslint-disable-line @typescript-eslint/no-explicit-any
  const fundingSource = account.fundingSources.get((body.payment as { funding_source_id: string }).funding_source_id);
  const subtotal = Math.round(rewardsIn.reduce((sum, r) => sum + (r.value.denomination as number), 0) * 100) / 100;
  if (fundingSource && fundingSource.balance !== null && fundingSource.balance < subtotal) {
    return apiError(res, 402, 'Insufficient funds', { payment: { funding_source_id: fundingSource.id } });
  }
  if (fundingSource && fundingSource.balance !== null) fundingSource.balance = Math.round((fundingSource.balance - subtotal) * 100) / 100;
  const now = state.now();
  const orderId = randomId('ord');
  const labels = new Map(account.fields.map((f) => [f.id, f.label]));
  const rewards: SandboxReward[] = rewardsIn.map((r) => ({
    id: randomId('rwd'),
    order_id: orderId,
    created_at: serviceTimestamp(now),
    value: { denomination: r.value.denomination, currency_code: r.value.currency_code ?? 'USD' },
    delivery: { method: 'EMAIL', status: 'PENDING' },
    recipient: { name: r.recipient.name, email: r.recipient.email },
    products: [...r.products],
    custom_fields: ((r.custom_fields ?? []) as { id: string; value: string }[]).map((c) => ({ id: c.id, value: c.value, label: labels.get(c.id) as string })),
  }));
  const order: SandboxOrder = {
    id: orderId,
    external_id: externalId ?? null,
    status: 'EXECUTED',
    created_at: serviceTimestamp(now),
    payment: { funding_source_id: fundingSource?.id as string, subtotal, fees: 0, total: subtotal },
    rewards,
  };
  account.orders.set(order.id, order);
  if (externalId !== undefined) account.ordersByExternalId.set(externalId, { order, payloadHash });
  for (const reward of rewards) {
    account.rewards.push(reward);
    account.rewardsById.set(reward.id, reward);
  }
  res.status(200).json({ order });
}

function listRewards(req: ApiRequest, res: Response): void {
  const { account } = req.caller;
  const filters: [string, string][] = [];
  let offset = 0;
  let limit = 50;
  for (const [name, raw] of Object.entries(req.query)) {
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (typeof value !== 'string') return apiError(res, 400, `Query parameter ${name} must be a string`, { [name]: raw });
    if (name === 'offset' || name === 'limit') {
      const n = Number(value);
      const max = name === 'limit' ? 100 : Number.MAX_SAFE_INTEGER;
      if (!/^\d+$/.test(value) || n > max || (name === 'limit' && n < 1)) {
        return apiError(res, 400, `${name} must be a whole number${name === 'limit' ? ' from 1 to 100' : ''}`, { [name]: value });
      }
      if (name === 'offset') offset = n;
      else limit = n;
      continue;
    }
    filters.push([name, value]);
  }
  const matches: SandboxReward[] = [];
  for (let i = account.rewards.length - 1; i >= 0; i--) {
    const reward = account.rewards[i];
    if (filters.every(([label, value]) => reward.custom_fields.some((c) => c.label === label && c.value === value))) matches.push(reward);
  }
  res.json({ rewards: matches.slice(offset, offset + limit), total_count: matches.length });
}
