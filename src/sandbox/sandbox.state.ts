import type { AccessToken, AuthorizationCode, Grant, PendingConsent, SandboxAccount, SandboxClient, SeedAccount } from './sandbox.model';
import { derivedServiceId, randomId } from './sandbox.model';
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
}

/** Entries kept at most in maps that grow from unauthenticated requests; the oldest go first. */
export const UNAUTHENTICATED_MAP_CAP = 10_000;

export class SandboxState {
  accounts = new Map<string, SandboxAccount>();
  clients = new Map<string, SandboxClient>();
  codes = new Map<string, AuthorizationCode>();
  grants = new Map<string, Grant>();
  accessTokens = new Map<string, AccessToken>();
  /** refresh token → grant id and whether it was used */
  refreshTokens = new Map<string, { grantId: string; used: boolean }>();
  apiKeys = new Map<string, string>();
  pendingConsents = new Map<string, PendingConsent>();
  calls = new Map<string, number>();
  rateLimiter = new RateLimiter();
  clockOffsetMs = 0;
  settings: SandboxSettings;

  constructor(
    private readonly initialClients: SandboxClient[],
    private readonly initialSettings: Partial<SandboxSettings> = {},
  ) {
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
    this.settings = {
      accessTokenTtlSeconds: 7200,
      codeTtlSeconds: 120,
      autoApprove: false,
      autoApproveAccountId: DEMO_ACCOUNT_ID,
      rotateRefreshTokens: true,
      orderShape: 'single',
      pendingApprovalStatus: 200,
      rateLimitRps: 0,
      ...this.initialSettings,
    };
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
      fundingSources: new Map(seed.funding_sources.map((f) => [f.id, { ...f, method: f.method ?? 'balance' }])),
      products: new Map(seed.products.map((p) => [p.id, { ...p, currency_codes: [...p.currency_codes] }])),
      campaigns: new Map((seed.campaigns ?? []).map((c) => [c.id, { id: c.id, name: c.name, description: c.description ?? '', products: [...c.products] }])),
      orders: previous?.orders ?? new Map(),
      ordersByExternalId: previous?.ordersByExternalId ?? new Map(),
      orderList: previous?.orderList ?? [],
      rewards: previous?.rewards ?? [],
      rewardsById: previous?.rewardsById ?? new Map(),
    };
    this.accounts.set(account.id, account);
    this.apiKeys.set(account.apiKey, account.id);
    return account;
  }

  count(route: string): void {
    this.calls.set(route, (this.calls.get(route) ?? 0) + 1);
  }

  /** Issues a fresh access/refresh pair on a grant; the previous refresh token stays consumed. */
  issueTokens(grant: Grant, keepRefreshToken?: string): { access_token: string; token_type: 'Bearer'; expires_in: number; refresh_token: string; scope: string; created_at: number } {
    const nowMs = this.now();
    const access = randomId('sbx_at', 24);
    const refresh = keepRefreshToken ?? randomId('sbx_rt', 24);
    const ttl = this.settings.accessTokenTtlSeconds;
    // The service's clock has 1-second resolution: created_at is whole seconds and expiry follows from it.
    const createdAt = Math.floor(nowMs / 1000);
    this.accessTokens.set(access, { grantId: grant.id, expiresAtMs: (createdAt + ttl) * 1000 });
    grant.accessTokens.add(access);
    if (!keepRefreshToken) this.refreshTokens.set(refresh, { grantId: grant.id, used: false });
    grant.currentRefreshToken = refresh;
    return { access_token: access, token_type: 'Bearer', expires_in: ttl, refresh_token: refresh, scope: grant.scopes.join(' '), created_at: createdAt };
  }

  revokeGrant(grant: Grant, reason: string): void {
    grant.revoked = true;
    grant.revokedReason = reason;
    for (const token of grant.accessTokens) this.accessTokens.delete(token);
    grant.accessTokens.clear();
  }
}

/**
 * Adds to a map that grows from unauthenticated requests (consent requests; codes under auto-approval): first
 * drops entries that expired more than `graceMs` ago — oldest first, stopping at the first live one, since
 * entries arrive roughly in expiry order — then the oldest entries beyond `cap`. O(1) amortised.
 */
export function setBounded<V extends { expiresAt: number }>(map: Map<string, V>, key: string, value: V, now: number, graceMs = 0, cap = UNAUTHENTICATED_MAP_CAP): void {
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
