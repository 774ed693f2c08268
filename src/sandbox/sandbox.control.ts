import express from 'express';
import type { Request, Response, Router } from 'express';
import type { WebhookDeliveries } from './sandbox.deliveries';
import type { FaultInjector } from './sandbox.faults';
import { validateFault } from './sandbox.faults';
import type {
  SandboxAccount,
  SandboxOrder,
  SandboxSettings,
  SandboxState,
  SeedAccount,
} from './sandbox.state';
import { UNAUTHENTICATED_MAP_CAP, demoSeed } from './sandbox.state';
import { checkFields, checkSeedAccount, normalizeFields } from './sandbox.seed';
import { approveOrder, findOrder, orderView, rejectOrder } from './sandbox.orders';
import { webhookControlRouter } from './sandbox.webhooks';

/**
 * `/__control`: test controls, off unless enabled. Reset and seed accounts, change settings (token lifetime,
 * auto-approval, order shape, approvals, rate limit), move the clock, inject faults, read call, refresh and
 * rate-limit counters and the orders received, approve or reject held orders without a token, set how rewards are
 * delivered and webhook events sent, and read the webhook attempts (`/webhooks`, sandbox.webhooks.ts).
 */
export function controlRouter(
  state: SandboxState,
  faults: FaultInjector,
  deliveries: WebhookDeliveries,
): Router {
  const router = express.Router();
  router.use(express.json({ limit: '1mb' }));
  const bad = (res: Response, message: string) => res.status(400).json({ error: message });

  router.post('/reset', (req, res) => {
    const accounts = (req.body as { accounts?: unknown } | undefined)?.accounts;
    if (accounts !== undefined) {
      if (!Array.isArray(accounts)) return bad(res, 'accounts must be an array');
      if (accounts.length > state.limits.accounts)
        return bad(res, `at most ${state.limits.accounts} accounts`);
      for (const seed of accounts as unknown[]) {
        const problem =
          checkSeedAccount(seed) ??
          (typeof (seed as SeedAccount).id === 'string' && (seed as SeedAccount).id
            ? null
            : 'each account needs an id');
        if (problem) return bad(res, problem);
      }
    }
    faults.clear();
    deliveries.reset();
    state.reset(Array.isArray(accounts) ? (accounts as SeedAccount[]) : demoSeed());
    res.json({ ok: true, accounts: [...state.accounts.keys()] });
  });

  router.get('/accounts', (_req, res) => {
    res.json({ accounts: [...state.accounts.values()].map(accountView) });
  });

  router.put('/accounts/:id', (req: Request, res) => {
    const problem = checkSeedAccount(req.body);
    if (problem) return bad(res, problem);
    if (!state.accounts.has(String(req.params.id)) && state.accounts.size >= state.limits.accounts) {
      return bad(res, `at most ${state.limits.accounts} accounts`);
    }
    const account = state.upsertAccount({ ...(req.body as SeedAccount), id: String(req.params.id) });
    res.json({ id: account.id, api_key: account.apiKey, organization_id: account.organizationId });
  });

  router.put('/accounts/:id/fields', (req, res) => {
    const account = state.accounts.get(String(req.params.id));
    if (!account) return bad(res, 'unknown account');
    const fields = (req.body as { fields?: unknown } | undefined)?.fields;
    const problem = checkFields(fields);
    if (problem) return bad(res, problem);
    account.fields = normalizeFields(fields as SeedAccount['fields']);
    res.json({ fields: account.fields });
  });

  router.post('/accounts/:id/approvals', (req, res) => {
    const account = state.accounts.get(String(req.params.id));
    const required = (req.body as { required?: unknown } | undefined)?.required;
    if (!account) return bad(res, 'unknown account');
    if (typeof required !== 'boolean') return bad(res, 'required must be true or false');
    account.approvalsRequired = required;
    res.json({ id: account.id, approvals_required: account.approvalsRequired });
  });

  router.post('/accounts/:id/funding-sources/:fs', (req, res) => {
    const source = state.accounts.get(String(req.params.id))?.fundingSources.get(String(req.params.fs));
    const balance = (req.body as { balance?: unknown } | undefined)?.balance;
    if (!source) return bad(res, 'unknown account or funding source');
    if (balance !== null && (typeof balance !== 'number' || balance < 0))
      return bad(res, 'balance must be a number >= 0, or null for unlimited');
    source.balance = balance as number | null;
    res.json(source);
  });

  router.post('/settings', (req, res) => {
    const problem = applySettings(state, (req.body ?? {}) as Record<string, unknown>);
    if (problem) return bad(res, problem);
    res.json(settingsView(state.settings));
  });
  router.get('/settings', (_req, res) => res.json(settingsView(state.settings)));

  router.post('/clock/advance', (req, res) => {
    const seconds = (req.body as { seconds?: unknown } | undefined)?.seconds;
    if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return bad(res, 'seconds must be a number');
    state.clockOffsetMs += seconds * 1000;
    res.json({ now: new Date(state.now()).toISOString(), offset_seconds: state.clockOffsetMs / 1000 });
  });

  router.get('/faults', (_req, res) => res.json({ faults: faults.rules }));
  router.post('/faults', (req, res) => {
    const { rule, error } = validateFault(req.body);
    if (!rule) return bad(res, error as string);
    if (faults.rules.length >= state.limits.faultRules)
      return bad(res, `at most ${state.limits.faultRules} fault rules`);
    faults.rules.push(rule);
    res.status(201).json({ faults: faults.rules });
  });
  router.delete('/faults', (_req, res) => {
    faults.clear();
    res.json({ faults: [] });
  });

  router.get('/stats', (_req, res) => {
    const grants = [...state.grants.values()].map((g) => ({
      id: g.id,
      account_id: g.accountId,
      scopes: g.scopes,
      refresh_count: g.refreshCount,
      revoked: g.revoked,
      revoked_reason: g.revokedReason ?? null,
    }));
    res.json({
      calls: Object.fromEntries(state.calls),
      refreshes: Object.fromEntries(grants.map((g) => [g.id, g.refresh_count])),
      grants,
      rate_limit: state.rateLimiter.stats(),
      sizes: state.sizes(),
    });
  });

  router.post('/grants/:id/revoke', (req, res) => {
    const grant = state.grants.get(String(req.params.id));
    if (!grant) return bad(res, 'unknown grant');
    state.revokeGrant(grant, 'revoked by the account holder');
    res.json({ id: grant.id, revoked: true });
  });

  router.get('/orders', (req, res) => {
    const accountId = typeof req.query.account_id === 'string' ? req.query.account_id : undefined;
    const orders = [...state.accounts.values()]
      .filter((a) => !accountId || a.id === accountId)
      .flatMap((a) => a.orderList.map((o) => controlOrderView(a, o)));
    res.json({ orders, total_count: orders.length });
  });

  // The same as POST /api/v2/order_approvals/:id/approve|reject, without a token. `:id` = order id or external_id;
  // `?account_id=` narrows the search when external ids repeat across accounts.
  for (const decision of ['approve', 'reject'] as const) {
    router.post(`/orders/:id/${decision}`, (req, res) => {
      const key = String(req.params.id);
      const accountId = typeof req.query.account_id === 'string' ? req.query.account_id : undefined;
      const account = [...state.accounts.values()].find(
        (a) => (!accountId || a.id === accountId) && findOrder(a, key),
      );
      const order = account && findOrder(account, key);
      if (!account || !order)
        return res.status(404).json({ errors: { message: 'Order not found', payload: {} } });
      const problem = decision === 'approve' ? approveOrder(account, order) : rejectOrder(order);
      if (problem)
        return res
          .status(problem.status)
          .json({ errors: { message: problem.message, payload: problem.payload } });
      deliveries.orderExecuted(account, order);
      res.json({ order: orderView(order) });
    });
  }

  router.use('/webhooks', webhookControlRouter(state, deliveries));

  return router;
}

function accountView(a: SandboxAccount) {
  return {
    id: a.id,
    name: a.name,
    organization_id: a.organizationId,
    api_key: a.apiKey,
    approvals_required: a.approvalsRequired,
    fields: a.fields,
    funding_sources: [...a.fundingSources.values()],
    products: [...a.products.values()],
    campaigns: [...a.campaigns.values()],
    orders: a.orders.size,
  };
}

function controlOrderView(a: SandboxAccount, o: SandboxOrder) {
  return {
    id: o.id,
    account_id: a.id,
    external_id: o.external_id,
    created_at: o.created_at,
    status: o.status,
    rewards: o.rewards.length,
    reward_ids: o.rewards.map((r) => r.id),
    recipients: o.rewards.map((r) => r.recipient.email ?? r.recipient.phone ?? r.recipient.name),
    total: o.subtotal,
  };
}

function settingsView(s: SandboxSettings) {
  return {
    access_token_ttl_seconds: s.accessTokenTtlSeconds,
    code_ttl_seconds: s.codeTtlSeconds,
    auto_approve: s.autoApprove,
    auto_approve_account_id: s.autoApproveAccountId,
    rotate_refresh_tokens: s.rotateRefreshTokens,
    order_shape: s.orderShape,
    pending_approval_http_status: s.pendingApprovalStatus,
    rate_limit_rps: s.rateLimitRps,
    rate_limit_retry_after: s.rateLimitRetryAfter ?? null,
    unauthenticated_map_cap: s.unauthenticatedMapCap,
  };
}

/** Applies `POST /__control/settings`; a message when a value is refused (then nothing is changed). */
function applySettings(state: SandboxState, body: Record<string, unknown>): string | null {
  const next: SandboxSettings = { ...state.settings };
  const num = (key: string, min: number) =>
    body[key] === undefined ||
    (typeof body[key] === 'number' && Number.isFinite(body[key]) && (body[key] as number) >= min);
  if (!num('access_token_ttl_seconds', 1)) return 'access_token_ttl_seconds must be >= 1';
  if (!num('code_ttl_seconds', 1)) return 'code_ttl_seconds must be >= 1';
  if (body.access_token_ttl_seconds !== undefined)
    next.accessTokenTtlSeconds = body.access_token_ttl_seconds as number;
  if (body.code_ttl_seconds !== undefined) next.codeTtlSeconds = body.code_ttl_seconds as number;
  if (body.auto_approve !== undefined) next.autoApprove = body.auto_approve === true;
  if (body.rotate_refresh_tokens !== undefined)
    next.rotateRefreshTokens = body.rotate_refresh_tokens !== false;
  if (body.auto_approve_account_id !== undefined) {
    if (!state.accounts.has(String(body.auto_approve_account_id))) return 'unknown account';
    next.autoApproveAccountId = String(body.auto_approve_account_id);
  }
  if (body.order_shape !== undefined) {
    if (body.order_shape !== 'single' && body.order_shape !== 'array')
      return 'order_shape must be single or array';
    next.orderShape = body.order_shape;
  }
  if (body.pending_approval_http_status !== undefined) {
    const code = body.pending_approval_http_status;
    if (code !== 200 && code !== 201 && code !== 202)
      return 'pending_approval_http_status must be 200, 201 or 202';
    next.pendingApprovalStatus = code;
  }
  if (body.rate_limit_rps !== undefined) {
    if (!Number.isInteger(body.rate_limit_rps) || (body.rate_limit_rps as number) < 0)
      return 'rate_limit_rps must be a whole number >= 0 (0 = no limit)';
    next.rateLimitRps = body.rate_limit_rps as number;
  }
  if (body.rate_limit_retry_after !== undefined) {
    if (body.rate_limit_retry_after === null) delete next.rateLimitRetryAfter;
    else if (!num('rate_limit_retry_after', 0))
      return 'rate_limit_retry_after must be a number of seconds >= 0, or null for no header';
    else next.rateLimitRetryAfter = body.rate_limit_retry_after as number;
  }
  if (body.unauthenticated_map_cap !== undefined) {
    const cap = body.unauthenticated_map_cap;
    if (!Number.isInteger(cap) || (cap as number) < 1 || (cap as number) > UNAUTHENTICATED_MAP_CAP)
      return `unauthenticated_map_cap must be a whole number from 1 to ${UNAUTHENTICATED_MAP_CAP}`;
    next.unauthenticatedMapCap = cap as number;
  }
  state.settings = next;
  return null;
}
