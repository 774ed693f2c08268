import { randomBytes } from 'node:crypto';
import express from 'express';
import type { Request, Response, Router } from 'express';
import { canonicalJson } from '../common/canonical-json';
import type { WebhookDeliveries } from './sandbox.deliveries';
import type { ApiRequest, Problem, RouteGuard } from './sandbox.http';
import { apiError, paging, problem, queryString, requireScope, sendProblem } from './sandbox.http';
import type {
  DeliveryMethod,
  DeliveryStatus,
  SandboxAccount,
  SandboxFundingSource,
  SandboxOrder,
  SandboxReward,
} from './sandbox.model';
import { serviceId, serviceTimestamp, sha256 } from './sandbox.model';
import type { SandboxState } from './sandbox.state';
import { INVOICE_FUNDING, validateOrder } from './sandbox.validation';

/**
 * Orders and rewards: POST/GET `/orders`, GET `/orders/:id`, POST `/order_approvals/:id/approve|reject`,
 * GET `/rewards`, GET `/rewards/:id`. `:id` of an order may be its `external_id`.
 *
 * POST /orders: 200 = a new order; 201 = the same `external_id` with the same payload (the existing order, nothing
 * created); 409 = the same `external_id` with another payload; 402 = not enough funds. An account that requires
 * approvals gets orders in `PENDING APPROVAL` (no funds taken; HTTP `settings.pendingApprovalStatus`).
 * A LINK reward's `delivery.link` is in the response that created the order and nowhere else. Once an order is
 * executed (created, or approved) its EMAIL and PHONE rewards are delivered later, with webhook events
 * (sandbox.deliveries.ts).
 */
export const NOT_ENOUGH_FUNDS = 'Not enough funds to carry out this operation. Fund your balance to proceed.';

export function ordersRouter(state: SandboxState, guard: RouteGuard, deliveries: WebhookDeliveries): Router {
  const router = express.Router();
  const scoped = requireScope('default');
  router.post('/orders', guard('orders'), scoped, express.json({ limit: '1mb' }), (req, res) =>
    createOrder(state, deliveries, req as ApiRequest, res),
  );
  router.get('/orders', guard('order_list'), scoped, (req, res) => listOrders(req as ApiRequest, res));
  router.get('/orders/:id', guard('order'), scoped, (req, res) => {
    const order = findOrder((req as ApiRequest).caller.account, String(req.params.id));
    if (!order) return apiError(res, 404, 'Order not found');
    res.json({ order: orderView(order) });
  });
  for (const decision of ['approve', 'reject'] as const) {
    router.post(`/order_approvals/:id/${decision}`, guard('order_approvals'), scoped, (req, res) => {
      const { account } = (req as ApiRequest).caller;
      const order = findOrder(account, String(req.params.id));
      if (!order) return apiError(res, 404, 'Order not found');
      const result = decision === 'approve' ? approveOrder(account, order) : rejectOrder(order);
      if (result) return sendProblem(res, result);
      deliveries.orderExecuted(account, order);
      res.json({ order: orderView(order) });
    });
  }
  router.get('/rewards', guard('rewards'), scoped, (req, res) => listRewards(req as ApiRequest, res));
  router.get('/rewards/:id', guard('reward'), scoped, (req, res) => {
    const reward = (req as ApiRequest).caller.account.rewardsById.get(String(req.params.id));
    if (!reward) return apiError(res, 404, 'Reward not found');
    res.json({ reward: rewardView(reward) });
  });
  return router;
}

/** An order by id, else by `external_id`. */
export function findOrder(account: SandboxAccount, key: string): SandboxOrder | undefined {
  return account.orders.get(key) ?? account.ordersByExternalId.get(key)?.order;
}

/** The order as the API shows it; `links` (reward id → link) only in the response that created the order. */
export function orderView(order: SandboxOrder, links?: Map<string, string>) {
  return {
    id: order.id,
    external_id: order.external_id,
    campaign_id: order.campaign_id,
    created_at: order.created_at,
    status: order.status,
    channel: 'API',
    // The service shows payment only for processed orders.
    ...(order.status === 'EXECUTED'
      ? {
          payment: {
            subtotal: order.subtotal,
            total: order.subtotal,
            fees: 0,
            discount: 0,
            currency_code: order.currencyCode,
          },
        }
      : {}),
    rewards: order.rewards.map((r) => rewardView(r, links?.get(r.id))),
  };
}

export function rewardView(reward: SandboxReward, link?: string) {
  return { ...reward, delivery: link ? { ...reward.delivery, link } : { ...reward.delivery } };
}

const round2 = (n: number) => Math.round(n * 100) / 100;

function deliveredStatus(method: DeliveryMethod): DeliveryStatus {
  return method === 'LINK' ? 'SUCCEEDED' : 'SCHEDULED';
}

/** Takes `amount` from the source; false (nothing taken) when it lacks the funds. */
function charge(source: SandboxFundingSource, amount: number): boolean {
  if (source.balance === null) return true;
  if (source.balance < amount) return false;
  source.balance = round2(source.balance - amount);
  return true;
}

function fundingSourceOf(account: SandboxAccount, order: SandboxOrder): SandboxFundingSource | undefined {
  return order.fundingSourceId === INVOICE_FUNDING.id
    ? INVOICE_FUNDING
    : account.fundingSources.get(order.fundingSourceId);
}

/** Approves an order held for approval: takes the funds, executes it. A Problem when it cannot. */
export function approveOrder(account: SandboxAccount, order: SandboxOrder): Problem | null {
  if (order.status !== 'PENDING APPROVAL')
    return problem('Order is not pending approval', { status: order.status }, 422);
  const source = fundingSourceOf(account, order);
  if (!source)
    return problem('Funding source not found', { 'payment.funding_source_id': order.fundingSourceId }, 422);
  if (!charge(source, order.subtotal)) return problem(NOT_ENOUGH_FUNDS, {}, 402);
  order.status = 'EXECUTED';
  for (const reward of order.rewards) reward.delivery.status = deliveredStatus(reward.delivery.method);
  return null;
}

/** Rejects an order held for approval: it is canceled, nothing is charged or delivered. */
export function rejectOrder(order: SandboxOrder): Problem | null {
  if (order.status !== 'PENDING APPROVAL')
    return problem('Order is not pending approval', { status: order.status }, 422);
  order.status = 'CANCELED';
  return null;
}

function payoutLink(req: Request): string {
  const base = req.baseUrl.replace(/\/api\/v2$/, '');
  return `https://${req.headers.host ?? 'testflight.tremendous.com'}${base}/rewards/payout/${randomBytes(18).toString('base64url')}`;
}

function createOrder(
  state: SandboxState,
  deliveries: WebhookDeliveries,
  req: ApiRequest,
  res: Response,
): void {
  const { account } = req.caller;
  const body = (
    req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? req.body : null
  ) as Record<string, unknown> | null;
  if (!body) return apiError(res, 400, 'The request body must be a JSON object');
  const { external_id: externalIdRaw, ...withoutExternalId } = body;
  const payloadHash = sha256(canonicalJson(withoutExternalId));
  // A repeated external_id is answered before validation: the original order stands whatever happened since.
  const existing =
    typeof externalIdRaw === 'string' ? account.ordersByExternalId.get(externalIdRaw) : undefined;
  if (existing) {
    if (existing.payloadHash !== payloadHash) {
      return apiError(res, 409, 'An order with this external_id already exists with different parameters', {
        external_id: externalIdRaw,
      });
    }
    res.status(201).json({ order: orderView(existing.order) }); // the existing order; nothing created
    return;
  }
  const valid = validateOrder(account, body, state.settings.orderShape);
  if ('status' in valid) return sendProblem(res, valid);

  const pending = account.approvalsRequired;
  const subtotal = round2(valid.rewards.reduce((sum, r) => sum + r.value.denomination, 0));
  if (!pending && !charge(valid.fundingSource, subtotal)) return apiError(res, 402, NOT_ENOUGH_FUNDS);
  const now = state.now();
  const orderId = serviceId();
  const links = new Map<string, string>();
  const rewards: SandboxReward[] = valid.rewards.map((r) => {
    const reward: SandboxReward = {
      id: serviceId(),
      order_id: orderId,
      created_at: serviceTimestamp(now),
      expires_at: null,
      deliver_at: r.deliverAt,
      value: r.value,
      recipient: r.recipient,
      custom_fields: r.custom_fields,
      delivery: { method: r.method, status: pending ? 'PENDING' : deliveredStatus(r.method) },
    };
    if (r.method === 'LINK') links.set(reward.id, payoutLink(req));
    return reward;
  });
  const order: SandboxOrder = {
    id: orderId,
    external_id: valid.externalId ?? null,
    campaign_id: valid.rewards[0].campaignId,
    created_at: serviceTimestamp(now),
    createdAtMs: now,
    status: pending ? 'PENDING APPROVAL' : 'EXECUTED',
    rewards,
    fundingSourceId: valid.fundingSource.id,
    subtotal,
    currencyCode: valid.rewards[0].value.currency_code,
  };
  account.orders.set(order.id, order);
  account.orderList.push(order);
  if (valid.externalId !== undefined)
    account.ordersByExternalId.set(valid.externalId, { order, payloadHash });
  for (const reward of rewards) {
    account.rewards.push(reward);
    account.rewardsById.set(reward.id, reward);
  }
  state.capOrders(account);
  deliveries.orderExecuted(account, order);
  res.status(pending ? state.settings.pendingApprovalStatus : 200).json({ order: orderView(order, links) });
}

function dateFilter(req: Request, bound: 'gte' | 'lte'): number | undefined | Problem {
  const nested = req.query.created_at as Record<string, unknown> | undefined;
  const raw = queryString(
    req.query[`created_at[${bound}]`] ?? (nested && typeof nested === 'object' ? nested[bound] : undefined),
  );
  if (raw === undefined) return undefined;
  const ms = raw === null ? NaN : Date.parse(raw);
  if (Number.isNaN(ms))
    return problem(`created_at[${bound}] must be an ISO 8601 date`, { [`created_at[${bound}]`]: raw });
  return ms;
}

function listOrders(req: ApiRequest, res: Response): void {
  const page = paging(req.query, 10, 500);
  if ('status' in page) return sendProblem(res, page);
  const externalId = queryString(req.query.external_id);
  const campaignId = queryString(req.query.campaign_id);
  if (externalId === null || campaignId === null)
    return apiError(res, 400, 'external_id and campaign_id must be strings', {
      external_id: req.query.external_id,
      campaign_id: req.query.campaign_id,
    });
  const from = dateFilter(req, 'gte');
  const to = dateFilter(req, 'lte');
  if (typeof from === 'object') return sendProblem(res, from);
  if (typeof to === 'object') return sendProblem(res, to);
  const list = req.caller.account.orderList;
  const matches: SandboxOrder[] = [];
  for (let i = list.length - 1; i >= 0; i--) {
    const o = list[i];
    if (externalId !== undefined && o.external_id !== externalId) continue;
    if (campaignId !== undefined && o.campaign_id !== campaignId) continue;
    if ((from !== undefined && o.createdAtMs < from) || (to !== undefined && o.createdAtMs > to)) continue;
    matches.push(o);
  }
  res.json({
    orders: matches.slice(page.offset, page.offset + page.limit).map((o) => orderView(o)),
    total_count: matches.length,
  });
}

/** GET /rewards: newest first; any query parameter other than offset/limit filters by custom-field label. */
function listRewards(req: ApiRequest, res: Response): void {
  const page = paging(req.query, 100, 500);
  if ('status' in page) return sendProblem(res, page);
  const filters: [string, string][] = [];
  for (const [name, raw] of Object.entries(req.query)) {
    if (name === 'offset' || name === 'limit') continue;
    const value = queryString(raw);
    if (typeof value !== 'string')
      return apiError(res, 400, `Query parameter ${name} must be a string`, { [name]: raw });
    filters.push([name, value]);
  }
  const { rewards } = req.caller.account;
  const matches: SandboxReward[] = [];
  for (let i = rewards.length - 1; i >= 0; i--) {
    const reward = rewards[i];
    if (
      filters.every(([label, value]) =>
        reward.custom_fields.some((c) => c.label === label && c.value === value),
      )
    )
      matches.push(reward);
  }
  res.json({
    rewards: matches.slice(page.offset, page.offset + page.limit).map((r) => rewardView(r)),
    total_count: matches.length,
  });
}
