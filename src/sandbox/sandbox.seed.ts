import type { SandboxField, SeedAccount } from './sandbox.model';
import { FIELD_DATA_TYPES, FUNDING_METHODS, OPTION_TYPES, SERVICE_ID } from './sandbox.model';

/**
 * The demo accounts the sandbox starts with, and the checks on accounts and fields seeded through `/__control`
 * (enough that a bad seed is refused with a message instead of crashing a later request).
 */
export const DEMO_ACCOUNT_ID = 'acc_demo';

export function demoSeed(): SeedAccount[] {
  return [
    {
      id: DEMO_ACCOUNT_ID,
      name: 'Demo Rewards Co',
      api_key: 'sbx_account_demo_key_0000000000000000',
      fields: [
        {
          id: 'FLDDEPARTMENT',
          label: 'Department',
          data: { options: ['Sales', 'Engineering', 'Support', 'Marketing'] },
          required: true,
        },
        {
          id: 'FLDCAMPAIGN',
          label: 'Campaign',
          data: { options: ['Q4 Kudos', 'Referral', 'Onboarding', 'Anniversary'] },
          required: false,
        },
        { id: 'FLDREGION', label: 'Region', data: { options: ['EMEA', 'AMER', 'APAC'] }, required: false },
      ],
      funding_sources: [
        { id: 'FSDEMOMAIN', name: 'Main balance', method: 'balance', balance: 10_000_000 },
        { id: 'FSDEMOSMALL', name: 'Petty cash', method: 'credit_card', balance: 100 },
      ],
      products: [
        {
          id: 'PRODAMAZONUS',
          name: 'Amazon.com Gift Card',
          currency_codes: ['USD'],
          min_denomination: 1,
          max_denomination: 2000,
        },
        {
          id: 'PRODVISAPREPAID',
          name: 'Visa Prepaid Card',
          currency_codes: ['USD'],
          min_denomination: 5,
          max_denomination: 1000,
        },
        {
          id: 'PRODCHOICE',
          name: 'Reward Choice',
          currency_codes: ['USD', 'EUR', 'GBP'],
          min_denomination: 1,
          max_denomination: 5000,
        },
      ],
      campaigns: [{ id: 'CAMPAIGNDEMO1', name: 'Q4 Kudos', products: ['PRODAMAZONUS', 'PRODCHOICE'] }],
    },
    {
      id: 'acc_other',
      name: 'Other Test Account',
      api_key: 'sbx_account_other_key_000000000000000',
      fields: [{ id: 'FLDTEAM', label: 'Team', data: { options: ['Red', 'Blue'] }, required: false }],
      funding_sources: [{ id: 'FSOTHERMAIN', name: 'Main balance', method: 'balance', balance: 1_000_000 }],
      products: [
        {
          id: 'PRODCHOICE',
          name: 'Reward Choice',
          currency_codes: ['USD', 'EUR'],
          min_denomination: 1,
          max_denomination: 5000,
        },
      ],
    },
  ];
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  !!v && typeof v === 'object' && !Array.isArray(v);
const badId = (what: string, id: unknown) => `${what} id ${JSON.stringify(id)} must match [A-Z0-9]{4,20}`;

/** Checks seeded custom fields; returns a message, or null when they are usable. */
export function checkFields(fields: unknown): string | null {
  if (!Array.isArray(fields)) return 'fields must be an array';
  const ids = new Set<string>();
  for (const f of fields as unknown[]) {
    if (!isObject(f)) return 'each field must be an object';
    if (typeof f.id !== 'string' || !SERVICE_ID.test(f.id)) return badId('field', f.id);
    if (ids.has(f.id)) return `field id ${f.id} given twice`;
    ids.add(f.id);
    if (typeof f.label !== 'string' || !f.label) return `field ${f.id} needs a label`;
    const type = f.data_type ?? 'Dropdown';
    if (!(FIELD_DATA_TYPES as readonly unknown[]).includes(type))
      return `field ${f.id}: data_type must be one of ${FIELD_DATA_TYPES.join(', ')}`;
    if (f.data !== undefined && !isObject(f.data)) return `field ${f.id}: data must be an object`;
    const options = (f.data as { options?: unknown } | undefined)?.options;
    if (OPTION_TYPES.includes(type as SandboxField['data_type'])) {
      if (
        !Array.isArray(options) ||
        options.length === 0 ||
        !options.every((o) => typeof o === 'string' && o.length > 0)
      ) {
        return `field ${f.id}: ${String(type)} needs data.options, a non-empty array of strings`;
      }
    }
    if (f.required !== undefined && typeof f.required !== 'boolean')
      return `field ${f.id}: required must be a boolean`;
  }
  return null;
}

/** The stored form of seeded fields (run `checkFields` first): data types defaulted, `data` copied. */
export function normalizeFields(fields: SeedAccount['fields']): SandboxField[] {
  return fields.map((f) => {
    const dataType = f.data_type ?? 'Dropdown';
    const data: SandboxField['data'] = OPTION_TYPES.includes(dataType)
      ? { options: [...(f.data?.options ?? [])], ...(f.data?.labels ? { labels: { ...f.data.labels } } : {}) }
      : {};
    return {
      id: f.id,
      label: f.label,
      data_type: dataType,
      data,
      required: f.required === true,
      scope: 'REWARD',
    };
  });
}

/** Checks a seeded account (id in the path or body is checked by the caller); returns a message or null. */
export function checkSeedAccount(seed: unknown): string | null {
  if (!isObject(seed)) return 'an account must be an object';
  if (
    typeof seed.name !== 'string' ||
    !Array.isArray(seed.fields) ||
    !Array.isArray(seed.funding_sources) ||
    !Array.isArray(seed.products)
  ) {
    return 'an account needs name, fields, funding_sources and products';
  }
  const fieldProblem = checkFields(seed.fields);
  if (fieldProblem) return fieldProblem;
  for (const fs of seed.funding_sources as unknown[]) {
    if (!isObject(fs) || typeof fs.id !== 'string' || !SERVICE_ID.test(fs.id))
      return badId('funding source', isObject(fs) ? fs.id : fs);
    if (fs.method !== undefined && !(FUNDING_METHODS as readonly unknown[]).includes(fs.method))
      return `funding source ${fs.id}: method must be one of ${FUNDING_METHODS.join(', ')}`;
    if (fs.balance !== null && (typeof fs.balance !== 'number' || fs.balance < 0))
      return `funding source ${fs.id}: balance must be a number >= 0, or null`;
  }
  const productIds = new Set<string>();
  for (const p of seed.products as unknown[]) {
    if (!isObject(p) || typeof p.id !== 'string' || !SERVICE_ID.test(p.id))
      return badId('product', isObject(p) ? p.id : p);
    if (
      !Array.isArray(p.currency_codes) ||
      typeof p.min_denomination !== 'number' ||
      typeof p.max_denomination !== 'number'
    ) {
      return `product ${p.id} needs currency_codes, min_denomination and max_denomination`;
    }
    productIds.add(p.id);
  }
  if (seed.campaigns !== undefined && !Array.isArray(seed.campaigns)) return 'campaigns must be an array';
  for (const c of (seed.campaigns ?? []) as unknown[]) {
    if (!isObject(c) || typeof c.id !== 'string' || !SERVICE_ID.test(c.id))
      return badId('campaign', isObject(c) ? c.id : c);
    if (typeof c.name !== 'string' || !Array.isArray(c.products) || c.products.length === 0)
      return `campaign ${c.id} needs a name and a non-empty products array`;
    const unknown = (c.products as unknown[]).find((id) => typeof id !== 'string' || !productIds.has(id));
    if (unknown !== undefined)
      return `campaign ${c.id}: product ${JSON.stringify(unknown)} is not a product of the account`;
  }
  if (seed.approvals_required !== undefined && typeof seed.approvals_required !== 'boolean')
    return 'approvals_required must be a boolean';
  return null;
}
