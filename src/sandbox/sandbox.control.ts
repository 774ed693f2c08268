import express from 'express';
import type { Request, Response, Router } from 'express';
import type { FaultInjector } from './sandbox.faults';
import { validateFault } from './sandbox.faults';
import type { SeedAccount, SandboxState } from './sandbox.state';
import { demoSeed } from './sandbox.state';

/**
 * `/__control`: test controls, off unless enabled. Reset and seed accounts, change token lifetime and
 * auto-approval, move the clock, inject faults, read call and refresh counters and the orders received.
 */
export function controlRouter(state: SandboxState, faults: FaultInjector): Router {
  const router = express.Router();
  router.use(express.json({ limit: '1mb' }));
  const bad = (res: Response, message: string) => res.status(400).json({ error: message });

  router.post('/reset', (req, res) => {
    faults.clear();
    const accounts = (req.body as { accounts?: SeedAccount[] } | undefined)?.accounts;
    state.reset(Array.isArray(accounts) ? accounts : demoSeed());
    res.json({ ok: true, accounts: [...state.accounts.keys()] });
  });

  router.get('/accounts', (_req, res) => {
    res.json({
      accounts: [...state.accounts.values()].map((a) => ({
        id: a.id,
        name: a.name,
        api_key: a.apiKey,
        fields: a.fields,
        funding_sources: [...a.fundingSources.values()],
        products: [...a.products.values()],
        orders: a.orders.size,
      })),
    });
  });

  router.put('/accounts/:id', (req: Request, res) => {
    const seed = req.body as SeedAccount;
    if (!seed || typeof seed.name !== 'string' || !Array.isArray(seed.fields) || !Array.isArray(seed.funding_sources) || !Array.isArray(seed.products)) {
      return bad(res, 'an account needs name, fields, funding_sources and products');
    }
    const account = state.upsertAccount({ ...seed, id: String(req.params.id) });
    res.json({ id: account.id, api_key: account.apiKey });
  });

  router.put('/accounts/:id/fields', (req, res) => {
    const account = state.accounts.get(String(req.params.id));
    if (!account) return bad(res, 'unknown account');
    const fields = (req.body as { fields?: SeedAccount['fields'] })?.fields;
    if (!Array.isArray(fields)) return bad(res, 'fields must be an array');
    account.fields = fields.map((f) => ({ scope: 'REWARD', data_type: 'Dropdown', ...f }));
    res.json({ fields: account.fields });
  });

  router.post('/accounts/:id/funding-sources/:fs', (req, res) => {
    const source = state.accounts.get(String(req.params.id))?.fundingSources.get(String(req.params.fs));
    const balance = (req.body as { balance?: unknown })?.balance;
    if (!source) return bad(res, 'unknown account or funding source');
    if (balance !== null && (typeof balance !== 'number' || balance < 0)) return bad(res, 'balance must be a number >= 0, or null for unlimited');
    source.balance = balance as number | null;
    res.json(source);
  });

  router.post('/settings', (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const s = state.settings;
    if (body.access_token_ttl_seconds !== undefined) {
      if (typeof body.access_token_ttl_seconds !== 'number' || body.access_token_ttl_seconds < 1) return bad(res, 'access_token_ttl_seconds must be >= 1');
      s.accessTokenTtlSeconds = body.access_token_ttl_seconds;
    }
    if (body.code_ttl_seconds !== undefined) {
      if (typeof body.code_ttl_seconds !== 'number' || body.code_ttl_seconds < 1) return bad(res, 'code_ttl_seconds must be >= 1');
      s.codeTtlSeconds = body.code_ttl_seconds;
    }
    if (body.auto_approve !== undefined) s.autoApprove = body.auto_approve === true;
    if (body.rotate_refresh_tokens !== undefined) s.rotateRefreshTokens = body.rotate_refresh_tokens !== false;
    if (body.auto_approve_account_id !== undefined) {
      if (!state.accounts.has(String(body.auto_approve_account_id))) return bad(res, 'unknown account');
      s.autoApproveAccountId = String(body.auto_approve_account_id);
    }
    res.json({
      access_token_ttl_seconds: s.accessTokenTtlSeconds,
      code_ttl_seconds: s.codeTtlSeconds,
      auto_approve: s.autoApprove,
      auto_approve_account_id: s.autoApproveAccountId,
      rotate_refresh_tokens: s.rotateRefreshTokens,
    });
  });

  router.post('/clock/advance', (req, res) => {
    const seconds = (req.body as { seconds?: unknown })?.seconds;
    if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return bad(res, 'seconds must be a number');
    state.clockOffsetMs += seconds * 1000;
    res.json({ now: new Date(state.now()).toISOString(), offset_seconds: state.clockOffsetMs / 1000 });
  });

  router.get('/faults', (_req, res) => res.json({ faults: faults.rules }));
  router.post('/faults', (req, res) => {
    const { rule, error } = validateFault(req.body);
    if (!rule) return bad(res, error as string);
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
      .flatMap((a) => [...a.orders.values()].map((o) => ({ id: o.id, account_id: a.id, external_id: o.external_id, created_at: o.created_at, rewards: o.rewards.length, total: o.payment.total })));
    res.json({ orders, total_count: orders.length });
  });

  return router;
}
