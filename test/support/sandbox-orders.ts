import { get, post, startSandbox, type RunningSandbox } from './sandbox';

/** Helpers for order tests against the sandbox: account API keys of the demo seed, order bodies, controls. */
export const DEMO_API_KEY = 'sbx_account_demo_key_0000000000000000';
export const OTHER_API_KEY = 'sbx_account_other_key_000000000000000';

export const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

type Json = Record<string, unknown>;

/** A valid reward for the demo account (EMAIL, one product, the required Department field). */
export function demoReward(overrides: Json = {}): Json {
  return {
    value: { denomination: 25, currency_code: 'USD' },
    delivery: { method: 'EMAIL' },
    recipient: { name: 'Ada Lovelace', email: 'ada@example.com' },
    products: ['PRODAMAZONUS'],
    custom_fields: [{ id: 'FLDDEPARTMENT', value: 'Engineering' }],
    ...overrides,
  };
}

/** The current form: one `reward` per order. */
export function singleOrder(overrides: Json = {}, reward: Json = {}): Json {
  return { payment: { funding_source_id: 'FSDEMOMAIN' }, reward: demoReward(reward), ...overrides };
}

/** The older form (sandbox setting `order_shape: 'array'`). */
export function arrayOrder(overrides: Json = {}, ...rewards: Json[]): Json {
  return {
    payment: { funding_source_id: 'FSDEMOMAIN' },
    rewards: (rewards.length ? rewards : [{}]).map((r) => demoReward(r)),
    ...overrides,
  };
}

export function sendOrder(baseUrl: string, body: unknown, apiKey = DEMO_API_KEY) {
  return post(baseUrl, '/api/v2/orders', body, bearer(apiKey));
}

export function apiGet(baseUrl: string, path: string, apiKey = DEMO_API_KEY) {
  return get(baseUrl, `/api/v2${path}`, bearer(apiKey));
}

export async function setSettings(baseUrl: string, settings: Json): Promise<Json> {
  const res = await post(baseUrl, '/__control/settings', settings);
  if (res.status !== 200) throw new Error(`settings refused: ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function setApprovals(baseUrl: string, accountId: string, required: boolean): Promise<void> {
  const res = await post(baseUrl, `/__control/accounts/${accountId}/approvals`, { required });
  if (res.status !== 200) throw new Error(`approvals refused: ${JSON.stringify(res.body)}`);
}

export async function setBalance(
  baseUrl: string,
  accountId: string,
  fundingSourceId: string,
  balance: number | null,
): Promise<void> {
  const res = await post(baseUrl, `/__control/accounts/${accountId}/funding-sources/${fundingSourceId}`, {
    balance,
  });
  if (res.status !== 200) throw new Error(`balance refused: ${JSON.stringify(res.body)}`);
}

export const SERVICE_ID_12 = /^[A-Z0-9]{12}$/;

/**
 * A sandbox on a free port for the enclosing `describe`, reset to the seed before each test. Returns a stand-in that
 * forwards to the running sandbox (it starts in `beforeAll`).
 */
export function useSandbox(): RunningSandbox {
  let current: RunningSandbox | undefined;
  beforeAll(async () => {
    current = await startSandbox();
  });
  afterAll(async () => {
    await current?.close();
  });
  beforeEach(async () => {
    await post((current as RunningSandbox).baseUrl, '/__control/reset', {});
  });
  return new Proxy({} as RunningSandbox, {
    get: (_target, prop) => (current as unknown as Record<string | symbol, unknown>)[prop],
  });
}
