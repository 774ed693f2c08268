import type {
  AccessToken,
  AuthorizationCode,
  Grant,
  PendingConsent,
  SandboxAccount,
  SandboxClient,
  SandboxReward,
  SandboxWebhookSettings,
  SeedAccount,
} from './sandbox.model';
import { DEFAULT_WEBHOOK_SETTINGS, derivedServiceId, randomId, sha256 } from './sandbox.model';
import { DEMO_ACCOUNT_ID, demoSeed, normalizeFields } from './sandbox.seed';
import { RateLimiter } from './sandbox.ratelimit';

/**
 * In-memory state of the rewards-service emulator: accounts, registered developer apps, authorization codes,
 * grants and tokens, settings, a controllable clock and the per-account rate limiter.
 */
export * from './sandbox.model';
export { DEMO_ACCOUNT_ID, demoSeed } from './sandbox.seed';

export type OrderShape = 'single' | 'array';

export interface SandboxSettings {
  accessTokenTtlSeconds: number;
  codeTtlSeconds: number;
  autoApprove: boolean;
  autoApproveAccountId: string;
  /** False: refresh responses carry no new refresh_token and the old one stays usable (a non-rotating server). */
  rotateRefreshTokens: boolean;
  /** `single` (the current service): one `reward` per order. `array`: the older `rewards: [...]` form. */
  orderShape: OrderShape;
  /** HTTP status of POST /orders for an order held in `PENDING APPROVAL` (unconfirmed; older versions: 202). */
  pendingApprovalStatus: 200 | 201 | 202;
  /** Admitted `/api/v2` requests per account in any 1-second interval; 0 = no limit. */
  rateLimitRps: number;
  /** Seconds for a `Retry-After` header on the rate limit's 429; unset = no header (the service documents none). */
  rateLimitRetryAfter?: number;
  /** Reward delivery and webhook events (`/__control/webhooks`). */
  webhooks: SandboxWebhookSettings;
  /**
   * Entries kept at most in each map that grows from unauthenticated requests (pending consents; codes under
   * auto-approval): UNAUTHENTICATED_MAP_CAP, or fewer — `/__control/settings` may lower it (a test proving the bound
   * without 10,000 requests), never raise it.
   */
  unauthenticatedMapCap: number;
}

/** Entries kept at most in maps that grow from unauthenticated requests; the oldest go first. */
export const UNAUTHENTICATED_MAP_CAP = 10_000;

/** The settings before configuration and `/__control` change them. */
export function defaultSettings(): SandboxSettings {
  return {
    accessTokenTtlSeconds: 7200,
    codeTtlSeconds: 120,
    autoApprove: false,
    autoApproveAccountId: DEMO_ACCOUNT_ID,
    rotateRefreshTokens: true,
    orderShape: 'single',
    pendingApprovalStatus: 200,
    rateLimitRps: 0,
    webhooks: { ...DEFAULT_WEBHOOK_SETTINGS, failRecipients: [] },
    unauthenticatedMapCap: UNAUTHENTICATED_MAP_CAP,
  };
}

/**
 * Bounds on everything that grows from traffic (an emulator keeps the newest, not everything). Pending consents and
 * authorization codes are capped at UNAUTHENTICATED_MAP_CAP (setBounded; SandboxSettings.unauthenticatedMapCap); the `calls` counters are keyed by route
 * name (a fixed set) and the rate-limit windows by account (capped below).
 */
export interface SandboxLimits {
  /** Orders kept per account; beyond it the oldest go, with their rewards (their `external_id` is forgotten too). */
  ordersPerAccount: number;
  /** Rewards kept per account (an order holds up to 100); beyond it the oldest orders go. */
  rewardsPerAccount: number;
  /** Grants kept; beyond it the oldest revoked one goes, else the oldest (its tokens stop working). */
  grants: number;
  /** Access tokens kept per grant (each refresh adds one while the older ones live on); the oldest go first. */
  accessTokensPerGrant: number;
  /** Used refresh tokens remembered per grant for reuse detection; an older one is answered as unknown. */
  usedRefreshTokensPerGrant: number;
  /** Accounts (`PUT /__control/accounts/:id` refuses more). */
  accounts: number;
  /** Injected fault rules (`POST /__control/faults` refuses more). */
  faultRules: number;
  /** An expired access token is forgotten this long after its expiry (until then: 401 "no longer valid"). */
  expiredAccessTokenGraceMs: number;
  /** How often expired tokens, codes and consents are swept (also on the first token issued after that long). */
  sweepIntervalMs: number;
  /**
   * Reward deliveries waiting for their delay plus webhook events being sent or waiting to be retried; beyond it a
   * reward is delivered at once without events, and a retry is given up (both counted as `dropped`).
   */
  pendingWebhookDeliveries: number;
  /** Webhook attempts remembered for `GET /__control/webhooks/deliveries` (the newest). */
  webhookLog: number;
}

export const DEFAULT_SANDBOX_LIMITS: Readonly<SandboxLimits> = {
  ordersPerAccount: 100_000,
  rewardsPerAccount: 200_000,
  grants: 10_000,
  accessTokensPerGrant: 20,
  usedRefreshTokensPerGrant: 20,
  accounts: 1_000,
  faultRules: 1_000,
  expiredAccessTokenGraceMs: 3_600_000,
  sweepIntervalMs: 60_000,
  pendingWebhookDeliveries: 10_000,
  webhookLog: 1_000,
};

/** A used authorization code is remembered this long after its expiry (a replay still revokes what it obtained). */
export const USED_CODE_GRACE_MS = 3_600_000;

/** Entries dropped at once when a per-account cap is passed: 1 % of it, so trimming is O(1) amortised per order. */
const trimBatch = (cap: number) => Math.max(1, Math.floor(cap / 100));

export class SandboxState {
  accounts = new Map<string, SandboxAccount>();
  clients = new Map<string, SandboxClient>();
  // Tokens and codes are kept (and persisted) only as their SHA-256 digests (tokenKey), as a real service would.
  /** tokenKey(authorization code) → the code's request */
  codes = new Map<string, AuthorizationCode>();
  grants = new Map<string, Grant>();
  /** tokenKey(access token) → grant and expiry */
  accessTokens = new Map<string, AccessToken>();
  /** tokenKey(refresh token) → grant id and whether it was used */
  refreshTokens = new Map<string, { grantId: string; used: boolean }>();
  apiKeys = new Map<string, string>();
  pendingConsents = new Map<string, PendingConsent>();
  calls = new Map<string, number>();
  rateLimiter = new RateLimiter();
  clockOffsetMs = 0;
  settings: SandboxSettings;
  readonly limits: SandboxLimits;
  private lastSweepMs = 0;

  constructor(
    /** The registered developer apps given by configuration (they win over a restored snapshot's). */
    readonly initialClients: SandboxClient[],
    /** Settings given by configuration. */
    readonly initialSettings: Partial<SandboxSettings> = {},
    limits: Partial<SandboxLimits> = {},
  ) {
    this.limits = { ...DEFAULT_SANDBOX_LIMITS, ...limits };
    this.reset();
  }

  now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  /** Back to the seed (the demo accounts unless given), the initial settings and clients; everything else cleared. */
  reset(seed: SeedAccount[] = demoSeed()): void {
    this.accounts.clear();
    this.apiKeys.clear();
    this.codes.clear();
    this.grants.clear();
    this.accessTokens.clear();
    this.refreshTokens.clear();
    this.pendingConsents.clear();
    this.calls.clear();
    this.rateLimiter.clear();
    this.clockOffsetMs = 0;
    this.lastSweepMs = 0;
    this.settings = { ...defaultSettings(), ...this.initialSettings };
    this.clients = new Map(this.initialClients.map((c) => [c.clientId, { ...c }]));
    for (const account of seed) this.upsertAccount(account);
  }

  /** Creates or replaces an account from a (checked) seed; an existing account keeps its orders and rewards. */
  upsertAccount(seed: SeedAccount): SandboxAccount {
    const previous = this.accounts.get(seed.id);
    if (previous) this.apiKeys.delete(previous.apiKey);
    const account: SandboxAccount = {
      id: seed.id,
      name: seed.name,
      organizationId: derivedServiceId(`organization:${seed.id}`),
      apiKey: seed.api_key ?? randomId('sbx_account', 24),
      approvalsRequired: seed.approvals_required ?? previous?.approvalsRequired ?? false,
      fields: normalizeFields(seed.fields),
      fundingSources: new Map(
        seed.funding_sources.map((f) => [f.id, { ...f, method: f.method ?? 'balance' }]),
      ),
      products: new Map(seed.products.map((p) => [p.id, { ...p, currency_codes: [...p.currency_codes] }])),
      campaigns: new Map(
        (seed.campaigns ?? []).map((c) => [
          c.id,
          { id: c.id, name: c.name, description: c.description ?? '', products: [...c.products] },
        ]),
      ),
      orders: previous?.orders ?? new Map(),
      ordersByExternalId: previous?.ordersByExternalId ?? new Map(),
      orderList: previous?.orderList ?? [],
      rewards: previous?.rewards ?? [],
      rewardsById: previous?.rewardsById ?? new Map(),
      ...(previous?.webhook ? { webhook: previous.webhook } : {}),
    };
    this.accounts.set(account.id, account);
    this.apiKeys.set(account.apiKey, account.id);
    return account;
  }

  /** After an order was added to the account: drops the oldest orders (and their rewards) past the caps. */
  capOrders(account: SandboxAccount): void {
    const { ordersPerAccount, rewardsPerAccount } = this.limits;
    const list = account.orderList;
    if (list.length <= ordersPerAccount && account.rewards.length <= rewardsPerAccount) return;
    const keepOrders = ordersPerAccount - trimBatch(ordersPerAccount);
    const keepRewards = rewardsPerAccount - trimBatch(rewardsPerAccount);
    const dropped = new Set<SandboxReward>();
    let n = 0;
    while (
      n < list.length - 1 &&
      (list.length - n > keepOrders || account.rewards.length - dropped.size > keepRewards)
    ) {
      const order = list[n++];
      account.orders.delete(order.id);
      if (order.external_id !== null && account.ordersByExternalId.get(order.external_id)?.order === order) {
        account.ordersByExternalId.delete(order.external_id);
      }
      for (const reward of order.rewards) {
        dropped.add(reward);
        if (account.rewardsById.get(reward.id) === reward) account.rewardsById.delete(reward.id);
      }
    }
    list.splice(0, n);
    // Rewards are appended with their orders, so the dropped ones lead the list.
    let lead = 0;
    while (lead < account.rewards.length && dropped.has(account.rewards[lead])) lead++;
    account.rewards.splice(0, lead);
    if (lead < dropped.size) {
      let kept = 0;
      for (const reward of account.rewards) if (!dropped.has(reward)) account.rewards[kept++] = reward;
      account.rewards.length = kept;
    }
  }

  /** Stores a new grant; past the cap the oldest revoked grant goes, else the oldest grant (with its tokens). */
  addGrant(grant: Grant): void {
    this.grants.set(grant.id, grant);
    while (this.grants.size > this.limits.grants) {
      let victim: Grant | undefined;
      for (const g of this.grants.values()) {
        if (g.revoked) {
          victim = g;
          break;
        }
      }
      this.dropGrant(victim ?? (this.grants.values().next().value as Grant));
    }
  }

  /** Forgets a grant and every token it issued. */
  dropGrant(grant: Grant): void {
    for (const token of grant.accessTokens) this.accessTokens.delete(token);
    for (const token of grant.usedRefreshTokens) this.refreshTokens.delete(token);
    if (this.refreshTokens.get(grant.currentRefreshToken)?.grantId === grant.id)
      this.refreshTokens.delete(grant.currentRefreshToken);
    this.grants.delete(grant.id);
  }

  /** Marks a refresh token (its key) used; the grant remembers its newest used ones (reuse detection), older ones are forgotten. */
  consumeRefreshToken(grant: Grant, key: string): void {
    const record = this.refreshTokens.get(key);
    if (record) record.used = true;
    grant.usedRefreshTokens.push(key);
    while (grant.usedRefreshTokens.length > this.limits.usedRefreshTokensPerGrant) {
      this.refreshTokens.delete(grant.usedRefreshTokens.shift() as string);
    }
  }

  /**
   * Drops access tokens expired more than `expiredAccessTokenGraceMs` ago, consents past their expiry and codes an
   * hour past theirs. O(size); run every `sweepIntervalMs`. Answers how many entries went.
   */
  sweep(): number {
    const now = this.now();
    this.lastSweepMs = now;
    let removed = 0;
    const tokenLimit = now - this.limits.expiredAccessTokenGraceMs;
    for (const [token, record] of this.accessTokens) {
      if (record.expiresAtMs >= tokenLimit) continue;
      this.accessTokens.delete(token);
      this.grants.get(record.grantId)?.accessTokens.delete(token);
      removed++;
    }
    for (const [id, consent] of this.pendingConsents) {
      if (consent.expiresAt >= now) continue;
      this.pendingConsents.delete(id);
      removed++;
    }
    for (const [code, record] of this.codes) {
      if (record.expiresAt + USED_CODE_GRACE_MS >= now) continue;
      this.codes.delete(code);
      removed++;
    }
    return removed;
  }

  /** Counts of what the state holds (shown by `/__control/stats`). */
  sizes(): Record<string, number> {
    let orders = 0;
    let rewards = 0;
    let webhooks = 0;
    for (const a of this.accounts.values()) {
      orders += a.orderList.length;
      rewards += a.rewards.length;
      if (a.webhook) webhooks++;
    }
    return {
      accounts: this.accounts.size,
      pending_consents: this.pendingConsents.size,
      codes: this.codes.size,
      grants: this.grants.size,
      access_tokens: this.accessTokens.size,
      refresh_tokens: this.refreshTokens.size,
      orders,
      rewards,
      webhooks,
    };
  }

  count(route: string): void {
    this.calls.set(route, (this.calls.get(route) ?? 0) + 1);
  }

  /** Issues a fresh access/refresh pair on a grant; the previous refresh token stays consumed. */
  issueTokens(
    grant: Grant,
    keepRefreshToken?: string,
  ): {
    access_token: string;
    token_type: 'Bearer';
    expires_in: number;
    refresh_token: string;
    scope: string;
    created_at: number;
  } {
    const nowMs = this.now();
    const access = randomId('sbx_at', 24);
    const refresh = keepRefreshToken ?? randomId('sbx_rt', 24);
    const ttl = this.settings.accessTokenTtlSeconds;
    const accessKey = tokenKey(access);
    const refreshKey = tokenKey(refresh);
    // The service's clock has 1-second resolution: created_at is whole seconds and expiry follows from it.
    const createdAt = Math.floor(nowMs / 1000);
    if (nowMs - this.lastSweepMs >= this.limits.sweepIntervalMs) this.sweep();
    this.accessTokens.set(accessKey, { grantId: grant.id, expiresAtMs: (createdAt + ttl) * 1000 });
    grant.accessTokens.add(accessKey);
    for (const oldest of grant.accessTokens) {
      if (grant.accessTokens.size <= this.limits.accessTokensPerGrant) break;
      grant.accessTokens.delete(oldest);
      this.accessTokens.delete(oldest);
    }
    if (!keepRefreshToken) this.refreshTokens.set(refreshKey, { grantId: grant.id, used: false });
    grant.currentRefreshToken = refreshKey;
    return {
      access_token: access,
      token_type: 'Bearer',
      expires_in: ttl,
      refresh_token: refresh,
      scope: grant.scopes.join(' '),
      created_at: createdAt,
    };
  }

  revokeGrant(grant: Grant, reason: string): void {
    grant.revoked = true;
    grant.revokedReason = reason;
    for (const token of grant.accessTokens) this.accessTokens.delete(token);
    grant.accessTokens.clear();
  }
}

/** The key under which a token or authorization code is kept: its SHA-256 digest (never the value itself). */
export function tokenKey(token: string): string {
  return sha256(token);
}

/**
 * Adds to a map that grows from unauthenticated requests (consent requests; codes under auto-approval): first
 * drops entries that expired more than `graceMs` ago — oldest first, stopping at the first live one, since
 * entries arrive roughly in expiry order — then the oldest entries beyond `cap`. O(1) amortised.
 */
export function setBounded<V extends { expiresAt: number }>(
  map: Map<string, V>,
  key: string,
  value: V,
  now: number,
  graceMs = 0,
  cap = UNAUTHENTICATED_MAP_CAP,
): void {
  for (const [k, v] of map) {
    if (v.expiresAt + graceMs >= now) break;
    map.delete(k);
  }
  map.set(key, value);
  for (const k of map.keys()) {
    if (map.size <= cap) break;
    map.delete(k);
  }
}
