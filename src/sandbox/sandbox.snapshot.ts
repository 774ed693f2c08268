import type {
  AccessToken,
  AuthorizationCode,
  Grant,
  PendingConsent,
  SandboxAccount,
  SandboxCampaign,
  SandboxClient,
  SandboxFundingSource,
  SandboxOrder,
  SandboxProduct,
  SandboxReward,
  SandboxWebhook,
} from './sandbox.model';
import type { SandboxSettings, SandboxState } from './sandbox.state';
import { defaultSettings } from './sandbox.state';

/**
 * The whole SandboxState as one JSON document and back. Shared objects are written once and re-linked on load:
 * an order (with its rewards inline) is referenced from `orders`, `orderList` and `ordersByExternalId`; a reward
 * from `order.rewards`, `account.rewards` and `rewardsById`; a grant's tokens from `accessTokens`/`refreshTokens`.
 * Each account's webhook registration is kept with the account. Not kept: the rate-limit windows (they are on the
 * process's monotonic clock), injected faults, and reward deliveries and webhook events under way
 * (sandbox.deliveries.ts: rewards still `SCHEDULED` are delivered after a restart).
 *
 * The text is safe for a Postgres `jsonb` column, which refuses `\u0000` and lone surrogates: when a string (or an
 * object key) holds one, that document is written with such strings as `{"$chars": [UTF-16 code units]}` (objects
 * with such keys as `{"$entries": [[key, value], ...]}`) and `escaped: true`; loading undoes it.
 */
export const SNAPSHOT_VERSION = 1;

interface AccountSnapshot {
  id: string;
  name: string;
  organizationId: string;
  apiKey: string;
  approvalsRequired: boolean;
  fields: SandboxAccount['fields'];
  fundingSources: SandboxFundingSource[];
  products: SandboxProduct[];
  campaigns: SandboxCampaign[];
  /** Chronological (orderList), each with its rewards. */
  orders: SandboxOrder[];
  /** external_id, order id, payload hash. */
  externalIds: [string, string, string][];
  /** account.rewards in order, by id. */
  rewards: string[];
  /** Absent in snapshots written before webhooks existed, and for an account without one. */
  webhook?: SandboxWebhook;
}

type GrantSnapshot = Omit<Grant, 'accessTokens'> & { accessTokens: string[] };

export interface SandboxSnapshot {
  version: typeof SNAPSHOT_VERSION;
  escaped?: boolean;
  clockOffsetMs: number;
  settings: SandboxSettings;
  /** The settings configuration gave when this was written: a configuration changed since wins over `settings`. */
  configuredSettings: Partial<SandboxSettings>;
  clients: SandboxClient[];
  accounts: AccountSnapshot[];
  codes: [string, AuthorizationCode][];
  grants: GrantSnapshot[];
  accessTokens: [string, AccessToken][];
  /** token, grant id, used */
  refreshTokens: [string, string, boolean][];
  pendingConsents: [string, PendingConsent][];
  calls: [string, number][];
}

export function toSnapshot(state: SandboxState): SandboxSnapshot {
  return {
    version: SNAPSHOT_VERSION,
    clockOffsetMs: state.clockOffsetMs,
    settings: state.settings,
    configuredSettings: state.initialSettings,
    clients: [...state.clients.values()],
    accounts: [...state.accounts.values()].map((a) => ({
      id: a.id,
      name: a.name,
      organizationId: a.organizationId,
      apiKey: a.apiKey,
      approvalsRequired: a.approvalsRequired,
      fields: a.fields,
      fundingSources: [...a.fundingSources.values()],
      products: [...a.products.values()],
      campaigns: [...a.campaigns.values()],
      orders: a.orderList,
      externalIds: [...a.ordersByExternalId].map(([externalId, e]) => [
        externalId,
        e.order.id,
        e.payloadHash,
      ]),
      rewards: a.rewards.map((r) => r.id),
      ...(a.webhook ? { webhook: a.webhook } : {}),
    })),
    codes: [...state.codes],
    grants: [...state.grants.values()].map((g) => ({ ...g, accessTokens: [...g.accessTokens] })),
    accessTokens: [...state.accessTokens],
    refreshTokens: [...state.refreshTokens].map(([token, r]) => [token, r.grantId, r.used]),
    pendingConsents: [...state.pendingConsents],
    calls: [...state.calls],
  };
}

/** The state as JSON text a `jsonb` column accepts. Synchronous: nothing can change the state half-way. */
export function serializeSnapshot(state: SandboxState): string {
  const snapshot = toSnapshot(state);
  const text = JSON.stringify(snapshot);
  // JSON.stringify writes NUL as \u0000 and a lone surrogate as \udXXX; anything else is stored as it is.
  if (!/\\u(?:0000|d[89a-f])/i.test(text)) return text;
  return JSON.stringify({ ...snapshot, escaped: true }, escapeReplacer);
}

// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function escapeReplacer(_key: string, value: unknown): unknown {
  if (typeof value === 'string') {
    if (!UNSTORABLE.test(value)) return value;
    const chars: number[] = [];
    for (let i = 0; i < value.length; i++) chars.push(value.charCodeAt(i));
    return { $chars: chars };
  }
  if (
    value &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.keys(value).some((k) => UNSTORABLE.test(k))
  ) {
    return { $entries: Object.entries(value) };
  }
  return value;
}

function unescape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(unescape);
  if (!value || typeof value !== 'object') return value;
  const keys = Object.keys(value);
  const record = value as Record<string, unknown>;
  if (keys.length === 1 && keys[0] === '$chars' && Array.isArray(record.$chars))
    return fromCharCodes(record.$chars as number[]);
  if (keys.length === 1 && keys[0] === '$entries' && Array.isArray(record.$entries)) {
    return Object.fromEntries(
      (record.$entries as [unknown, unknown][]).map(([k, v]) => [unescape(k), unescape(v)]),
    );
  }
  return Object.fromEntries(keys.map((k) => [k, unescape(record[k])]));
}

function fromCharCodes(codes: number[]): string {
  let text = '';
  for (let i = 0; i < codes.length; i += 8192) text += String.fromCharCode(...codes.slice(i, i + 8192));
  return text;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Replaces the state with a stored snapshot (parsed JSON). The configured developer apps replace the stored ones
 * (credentials and redirect URIs follow the configuration); a setting whose configured value changed since the
 * snapshot takes the new value, the others keep what `/__control/settings` made of them. Throws on a document it
 * does not understand (then the state is left as it was).
 */
export function restoreSnapshot(state: SandboxState, stored: unknown): void {
  if (
    !stored ||
    typeof stored !== 'object' ||
    (stored as { version?: unknown }).version !== SNAPSHOT_VERSION
  ) {
    throw new Error(`not a sandbox snapshot of version ${SNAPSHOT_VERSION}`);
  }
  const snap = ((stored as SandboxSnapshot).escaped ? unescape(stored) : stored) as SandboxSnapshot;
  for (const key of [
    'accounts',
    'codes',
    'grants',
    'accessTokens',
    'refreshTokens',
    'pendingConsents',
    'calls',
    'clients',
  ] as const) {
    if (!Array.isArray(snap[key])) throw new Error(`sandbox snapshot without ${key}`);
  }

  const accounts = new Map<string, SandboxAccount>();
  const apiKeys = new Map<string, string>();
  for (const a of snap.accounts) {
    const orders = new Map<string, SandboxOrder>(a.orders.map((o) => [o.id, o]));
    const rewardsById = new Map<string, SandboxReward>();
    for (const order of a.orders) for (const reward of order.rewards) rewardsById.set(reward.id, reward);
    const rewards = a.rewards
      .map((id) => rewardsById.get(id))
      .filter((r): r is SandboxReward => r !== undefined);
    const ordersByExternalId = new Map<string, { order: SandboxOrder; payloadHash: string }>();
    for (const [externalId, orderId, payloadHash] of a.externalIds) {
      const order = orders.get(orderId);
      if (order) ordersByExternalId.set(externalId, { order, payloadHash });
    }
    accounts.set(a.id, {
      id: a.id,
      name: a.name,
      organizationId: a.organizationId,
      apiKey: a.apiKey,
      approvalsRequired: a.approvalsRequired,
      fields: a.fields,
      fundingSources: new Map(a.fundingSources.map((f) => [f.id, f])),
      products: new Map(a.products.map((p) => [p.id, p])),
      campaigns: new Map(a.campaigns.map((c) => [c.id, c])),
      orders,
      ordersByExternalId,
      orderList: a.orders,
      rewards,
      rewardsById: new Map(rewards.map((r) => [r.id, r])),
      ...(a.webhook ? { webhook: a.webhook } : {}),
    });
    apiKeys.set(a.apiKey, a.id);
  }

  // A snapshot from an older version lacks the settings added since: they take their defaults.
  const defaults = defaultSettings();
  const settings: SandboxSettings = {
    ...defaults,
    ...snap.settings,
    webhooks: { ...defaults.webhooks, ...snap.settings?.webhooks },
  };
  for (const [key, value] of Object.entries(state.initialSettings) as [keyof SandboxSettings, unknown][]) {
    if (!same(snap.configuredSettings?.[key], value))
      (settings as unknown as Record<string, unknown>)[key] = value;
  }

  state.accounts = accounts;
  state.apiKeys = apiKeys;
  state.clients = new Map(
    state.initialClients.map((c) => [c.clientId, { ...c, redirectUris: [...c.redirectUris] }]),
  );
  state.codes = new Map(snap.codes);
  state.grants = new Map(
    snap.grants.map((g) => [
      g.id,
      { ...g, accessTokens: new Set(g.accessTokens), usedRefreshTokens: g.usedRefreshTokens ?? [] },
    ]),
  );
  state.accessTokens = new Map(snap.accessTokens);
  state.refreshTokens = new Map(
    snap.refreshTokens.map(([token, grantId, used]) => [token, { grantId, used }]),
  );
  state.pendingConsents = new Map(snap.pendingConsents);
  state.calls = new Map(snap.calls);
  state.clockOffsetMs = typeof snap.clockOffsetMs === 'number' ? snap.clockOffsetMs : 0;
  state.settings = settings;
  state.rateLimiter.clear();
}
