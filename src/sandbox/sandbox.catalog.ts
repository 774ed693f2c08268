import express from 'express';
import type { Router } from 'express';
import type { ApiRequest, RouteGuard } from './sandbox.http';
import { apiError, requireScope } from './sandbox.http';
import type { SandboxAccount, SandboxCampaign, SandboxFundingSource, SandboxProduct } from './sandbox.model';
import { resolveFundingSource } from './sandbox.validation';

/**
 * What an account has to send rewards with: `/organizations`, `/fields`, `/funding_sources`, `/products`,
 * `/campaigns` (each also by id). Organizations need no particular scope; the rest need `default`.
 */
export function catalogRouter(guard: RouteGuard): Router {
  const router = express.Router();
  const scoped = requireScope('default');
  const account = (req: unknown) => (req as ApiRequest).caller.account;

  router.get('/organizations', guard('organizations'), (req, res) => {
    res.json({ organizations: [organizationView(account(req))] });
  });
  router.get('/organizations/:id', guard('organizations'), (req, res) => {
    const own = account(req);
    if (req.params.id !== own.organizationId) return apiError(res, 404, 'Organization not found');
    res.json({ organization: organizationView(own) });
  });

  router.get('/fields', guard('fields'), scoped, (req, res) => {
    res.json({ fields: account(req).fields });
  });

  router.get('/funding_sources', guard('funding_sources'), scoped, (req, res) => {
    res.json({ funding_sources: [...account(req).fundingSources.values()].map(fundingSourceView) });
  });
  router.get('/funding_sources/:id', guard('funding_sources'), scoped, (req, res) => {
    const source = resolveFundingSource(account(req), String(req.params.id), false);
    if (!source) return apiError(res, 404, 'Funding source not found');
    res.json({ funding_source: fundingSourceView(source) });
  });

  router.get('/products', guard('products'), scoped, (req, res) => {
    res.json({ products: [...account(req).products.values()].map(productView) });
  });
  router.get('/products/:id', guard('products'), scoped, (req, res) => {
    const product = account(req).products.get(String(req.params.id));
    if (!product) return apiError(res, 404, 'Product not found');
    res.json({ product: productView(product) });
  });

  router.get('/campaigns', guard('campaigns'), scoped, (req, res) => {
    res.json({ campaigns: [...account(req).campaigns.values()].map(campaignView) });
  });
  router.get('/campaigns/:id', guard('campaigns'), scoped, (req, res) => {
    const campaign = account(req).campaigns.get(String(req.params.id));
    if (!campaign) return apiError(res, 404, 'Campaign not found');
    res.json({ campaign: campaignView(campaign) });
  });
  return router;
}

export function organizationView(account: SandboxAccount) {
  return {
    id: account.organizationId,
    name: account.name,
    website: null,
    currency_code: 'USD',
    status: 'APPROVED',
  };
}

/** `available_*` are null for a source without a limit (invoice, or a balance seeded as unlimited). */
export function fundingSourceView(source: SandboxFundingSource) {
  const cents = source.balance === null ? null : Math.round(source.balance * 100);
  return {
    id: source.id,
    method: source.method,
    usage_permissions: ['api_orders', 'dashboard_orders', 'balance_funding'],
    status: 'active',
    meta: {
      available_cents: cents,
      available_amount: source.balance,
      currency_code: 'USD',
      pending_cents: 0,
    },
  };
}

export function productView(product: SandboxProduct) {
  return {
    id: product.id,
    name: product.name,
    description: '',
    category: 'merchant_card',
    currency_codes: [...product.currency_codes],
    countries: [{ abbr: 'US' }],
    skus: [{ min: product.min_denomination, max: product.max_denomination }],
    images: [],
  };
}

export function campaignView(campaign: SandboxCampaign) {
  return {
    id: campaign.id,
    name: campaign.name,
    description: campaign.description,
    products: [...campaign.products],
  };
}
