import type { Problem } from './sandbox.http';
import { problem } from './sandbox.http';
import type {
  DeliveryMethod,
  SandboxAccount,
  SandboxField,
  SandboxFundingSource,
  SandboxProduct,
} from './sandbox.model';
import { SERVICE_ID } from './sandbox.model';
import type { OrderShape } from './sandbox.state';

/**
 * Validation of POST /api/v2/orders bodies, in the current single-`reward` form or the older `rewards: [...]`
 * form. Problems name the offending input by dotted path (`reward.value.denomination`, `rewards[0].products`)
 * as the keys of `errors.payload`, each holding the value sent.
 */
export interface ValidReward {
  value: { denomination: number; currency_code: string };
  recipient: { name: string; email?: string; phone?: string };
  method: DeliveryMethod;
  campaignId: string | null;
  deliverAt: string | null;
  custom_fields: { id: string; value: string; label: string }[];
}

export interface ValidOrder {
  externalId?: string;
  fundingSource: SandboxFundingSource;
  rewards: ValidReward[];
}

export const MULTI_REWARD_MESSAGE =
  'Order failed: validation failure: multi-reward orders are not supported; send one reward per order';
const MAX_REWARDS_PER_ORDER = 100;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const PHONE = /^\+?[0-9]{7,15}$/;
const DELIVERY_METHODS: readonly DeliveryMethod[] = ['EMAIL', 'LINK', 'PHONE'];

/** `INVOICE` / `INVOICE_THEN_BALANCE`: paid by invoice, never short of funds (select enterprise clients). */
export const INVOICE_FUNDING: SandboxFundingSource = Object.freeze({
  id: 'INVOICE',
  name: 'Invoice',
  method: 'invoice',
  balance: null,
});

const isObject = (v: unknown): v is Record<string, unknown> =>
  !!v && typeof v === 'object' && !Array.isArray(v);

/**
 * A funding-source id, or case-insensitively `BALANCE` (the account's balance source), `INVOICE` or
 * `INVOICE_THEN_BALANCE` (orders: paid by invoice). `forOrder` false (GET /funding_sources/:id): INVOICE means the
 * account's own invoice source, if it has one.
 */
export function resolveFundingSource(
  account: SandboxAccount,
  id: string,
  forOrder: boolean,
): SandboxFundingSource | undefined {
  const upper = id.toUpperCase();
  const sources = [...account.fundingSources.values()];
  if (upper === 'BALANCE') return sources.find((s) => s.method === 'balance');
  if (upper === 'INVOICE' || upper === 'INVOICE_THEN_BALANCE')
    return forOrder ? INVOICE_FUNDING : sources.find((s) => s.method === 'invoice');
  return account.fundingSources.get(id);
}

export function normalizePhone(raw: string): string {
  return raw.replace(/[\s-]/g, '');
}

/**
 * Checks one custom-field value against its data type; a message, or null when valid.
 * List: the real service's encoding of several values is unconfirmed (spec §2 only says "several of
 * data.options"); the sandbox takes one string of comma-separated options, each at most once.
 */
export function fieldValueProblem(field: SandboxField, value: string): string | null {
  const options = field.data.options ?? [];
  switch (field.data_type) {
    case 'Checkbox':
      return value === 'true' || value === 'false' ? null : 'must be "true" or "false"';
    case 'Currency':
      return /^-?\d+(\.\d{1,2})?$/.test(value) ? null : 'must be an amount with at most two decimals';
    case 'Date': {
      const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
      const d = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : null;
      return d && d.toISOString().slice(0, 10) === value ? null : 'must be a date YYYY-MM-DD';
    }
    case 'Dropdown':
      return options.includes(value) ? null : `must be one of ${options.join(', ')}`;
    case 'Email':
      return EMAIL.test(value) && value.length <= 254 ? null : 'must be an e-mail address';
    case 'List': {
      const items = value.split(',').map((s) => s.trim());
      if (items.some((s) => !options.includes(s)))
        return `must be a comma-separated list of ${options.join(', ')}`;
      return new Set(items).size === items.length ? null : 'must not repeat a value';
    }
    case 'Number':
      return /^-?\d+(\.\d+)?$/.test(value) ? null : 'must be a number';
    case 'Phone':
      return PHONE.test(normalizePhone(value)) ? null : 'must be a phone number';
    case 'Text':
      return value.length <= 255 ? null : 'must be at most 255 characters';
    case 'TextArea':
      return value.length <= 5000 ? null : 'must be at most 5000 characters';
  }
}

/** Body → a valid order, or the first problem found. Funds, approvals and `external_id` reuse are the caller's. */
export function validateOrder(
  account: SandboxAccount,
  body: Record<string, unknown>,
  shape: OrderShape,
): ValidOrder | Problem {
  let rawRewards: unknown[];
  let paths: string[];
  if (shape === 'single') {
    if (body.rewards !== undefined) {
      const count = Array.isArray(body.rewards) ? `${body.rewards.length} rewards sent` : 'rewards sent';
      return problem(MULTI_REWARD_MESSAGE, { rewards: `${count}; send one reward per order` });
    }
    if (!isObject(body.reward))
      return problem('reward is required (an object)', { reward: body.reward ?? null });
    rawRewards = [body.reward];
    paths = ['reward'];
  } else {
    if (body.reward !== undefined)
      return problem('This sandbox is set to the older multi-reward form: send rewards: [...]', {
        reward: 'not accepted; send rewards: [...]',
      });
    if (!Array.isArray(body.rewards) || body.rewards.length === 0)
      return problem('rewards must be a non-empty array', { rewards: body.rewards ?? null });
    if (body.rewards.length > MAX_REWARDS_PER_ORDER)
      return problem(`An order holds at most ${MAX_REWARDS_PER_ORDER} rewards`, {
        rewards: body.rewards.length,
      });
    rawRewards = body.rewards;
    paths = rawRewards.map((_r, i) => `rewards[${i}]`);
  }
  const payment = body.payment;
  const fsId = isObject(payment) ? payment.funding_source_id : undefined;
  if (typeof fsId !== 'string' || !fsId) {
    return problem('Your request was missing a funding_source_id: payment.funding_source_id is required', {
      'payment.funding_source_id': fsId ?? null,
    });
  }
  const fundingSource = resolveFundingSource(account, fsId, true);
  if (!fundingSource) {
    const known = /^(BALANCE|INVOICE|INVOICE_THEN_BALANCE)$/i.test(fsId) || SERVICE_ID.test(fsId);
    return problem(known ? 'Funding source not found' : 'funding_source_id is not a valid id', {
      'payment.funding_source_id': fsId,
    });
  }
  if (
    body.external_id !== undefined &&
    body.external_id !== null &&
    (typeof body.external_id !== 'string' || body.external_id.length === 0 || body.external_id.length > 128)
  ) {
    return problem('external_id must be a string of 1 to 128 characters', { external_id: body.external_id });
  }
  const rewards: ValidReward[] = [];
  for (const [i, raw] of rawRewards.entries()) {
    const reward = validateReward(account, raw, paths[i]);
    if ('status' in reward) return reward;
    rewards.push(reward);
  }
  return {
    externalId: typeof body.external_id === 'string' ? body.external_id : undefined,
    fundingSource,
    rewards,
  };
}

function validateReward(account: SandboxAccount, raw: unknown, path: string): ValidReward | Problem {
  const r = isObject(raw) ? raw : {};
  const at = (field: string, v: unknown) => ({ [`${path}.${field}`]: v ?? null });
  const value = isObject(r.value) ? r.value : {};
  const denomination = value.denomination;
  if (typeof denomination !== 'number' || !Number.isFinite(denomination) || denomination <= 0) {
    return problem('value.denomination must be a positive number', at('value.denomination', denomination));
  }
  if (Math.round(denomination * 100) !== denomination * 100)
    return problem('value.denomination has more than two decimals', at('value.denomination', denomination));
  const currency = value.currency_code ?? 'USD';
  if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency))
    return problem('value.currency_code must be an ISO 4217 code', at('value.currency_code', currency));

  const products = productsOf(account, r, at);
  if ('status' in products) return products;
  for (const product of products.list) {
    if (!product.currency_codes.includes(currency))
      return problem(
        `Product ${product.id} is not available in ${currency}`,
        at('value.currency_code', currency),
        422,
      );
    if (denomination < product.min_denomination || denomination > product.max_denomination) {
      return problem(
        `Denomination must be between ${product.min_denomination} and ${product.max_denomination} for ${product.id}`,
        at('value.denomination', denomination),
        422,
      );
    }
  }

  const delivery = r.delivery === undefined ? {} : r.delivery;
  if (!isObject(delivery)) return problem('delivery must be an object', at('delivery', delivery));
  const method = delivery.method ?? 'EMAIL';
  if (!DELIVERY_METHODS.includes(method as DeliveryMethod))
    return problem('delivery.method must be EMAIL, LINK or PHONE', at('delivery.method', method));
  const recipient = recipientOf(r.recipient, method as DeliveryMethod, at);
  if ('status' in recipient) return recipient;

  let deliverAt: string | null = null;
  if (r.deliver_at !== undefined && r.deliver_at !== null) {
    if (
      typeof r.deliver_at !== 'string' ||
      !/^\d{4}-\d{2}-\d{2}/.test(r.deliver_at) ||
      Number.isNaN(Date.parse(r.deliver_at))
    ) {
      return problem('deliver_at must be a date (YYYY-MM-DD)', at('deliver_at', r.deliver_at));
    }
    deliverAt = r.deliver_at.slice(0, 10);
  }
  if (r.language !== undefined && (typeof r.language !== 'string' || !/^[a-z]{2}$/i.test(r.language))) {
    return problem('language must be a 2-letter ISO 639-1 code', at('language', r.language));
  }

  const customFields = customFieldsOf(account, r.custom_fields, at);
  if ('status' in customFields) return customFields;
  return {
    value: { denomination, currency_code: currency },
    recipient,
    method: method as DeliveryMethod,
    campaignId: products.campaignId,
    deliverAt,
    custom_fields: customFields.list,
  };
}

type At = (field: string, v: unknown) => Record<string, unknown>;

/** The products a reward uses: those named, else its campaign's. */
function productsOf(
  account: SandboxAccount,
  r: Record<string, unknown>,
  at: At,
): { list: SandboxProduct[]; campaignId: string | null } | Problem {
  let campaignId: string | null = null;
  let ids: unknown[] | undefined;
  if (r.campaign_id !== undefined && r.campaign_id !== null) {
    if (typeof r.campaign_id !== 'string' || !SERVICE_ID.test(r.campaign_id))
      return problem('campaign_id is not a valid id', at('campaign_id', r.campaign_id));
    const campaign = account.campaigns.get(r.campaign_id);
    if (!campaign) return problem('Campaign not found', at('campaign_id', r.campaign_id));
    campaignId = campaign.id;
    ids = campaign.products;
  }
  if (r.products !== undefined && r.products !== null) {
    if (!Array.isArray(r.products) || r.products.length === 0)
      return problem('products must be a non-empty array of product ids', at('products', r.products));
    ids = r.products;
  }
  if (!ids) return problem('Either products or campaign_id must be specified', at('products', null));
  const list: SandboxProduct[] = [];
  for (const id of ids) {
    const product = typeof id === 'string' && SERVICE_ID.test(id) ? account.products.get(id) : undefined;
    if (!product)
      return problem(
        typeof id === 'string' && SERVICE_ID.test(id) ? 'Product not found' : 'Product id is not a valid id',
        at('products', id),
      );
    list.push(product);
  }
  return { list, campaignId };
}

function recipientOf(raw: unknown, method: DeliveryMethod, at: At): ValidReward['recipient'] | Problem {
  const recipient = isObject(raw) ? raw : {};
  const { name, email, phone } = recipient;
  if (typeof name !== 'string' || !name.trim() || name.length > 255)
    return problem('recipient.name is required', at('recipient.name', name));
  const result: ValidReward['recipient'] = { name };
  if (method === 'EMAIL' || (email !== undefined && email !== null)) {
    if (typeof email !== 'string' || !EMAIL.test(email) || email.length > 254)
      return problem('recipient.email is not a valid e-mail address', at('recipient.email', email));
    result.email = email;
  }
  if (method === 'PHONE' || (phone !== undefined && phone !== null)) {
    // Non-US numbers need a + country code at the real service; the sandbox cannot tell them apart.
    if (typeof phone !== 'string' || !PHONE.test(normalizePhone(phone)))
      return problem('recipient.phone is not a valid phone number', at('recipient.phone', phone));
    result.phone = phone;
  }
  return result;
}

function customFieldsOf(
  account: SandboxAccount,
  raw: unknown,
  at: At,
): { list: ValidReward['custom_fields'] } | Problem {
  const custom = raw ?? [];
  if (!Array.isArray(custom)) return problem('custom_fields must be an array', at('custom_fields', custom));
  const fieldsById = new Map(account.fields.map((f) => [f.id, f]));
  const seen = new Set<string>();
  const list: ValidReward['custom_fields'] = [];
  for (const [j, cf] of custom.entries()) {
    const c = isObject(cf) ? cf : {};
    const field = typeof c.id === 'string' && SERVICE_ID.test(c.id) ? fieldsById.get(c.id) : undefined;
    if (!field)
      return problem(
        typeof c.id === 'string' && SERVICE_ID.test(c.id)
          ? 'Custom field not found'
          : 'Custom field id is not a valid id',
        at(`custom_fields[${j}].id`, c.id),
      );
    if (seen.has(field.id)) return problem('Custom field given twice', at(`custom_fields[${j}].id`, c.id));
    seen.add(field.id);
    if (c.value === null || c.value === undefined || c.value === '') continue; // absent: only required fields object
    if (typeof c.value !== 'string')
      return problem('Custom field value must be a string', at(`custom_fields[${j}].value`, c.value));
    const reason = fieldValueProblem(field, c.value);
    if (reason)
      return problem(
        `${field.label} (${field.data_type}) ${reason}`,
        at(`custom_fields[${j}].value`, c.value),
      );
    list.push({ id: field.id, value: c.value, label: field.label });
  }
  for (const field of account.fields) {
    if (field.required && !list.some((c) => c.id === field.id)) {
      return problem(
        `Custom field ${field.label} is required`,
        at('custom_fields', { id: field.id, label: field.label }),
      );
    }
  }
  return { list };
}
