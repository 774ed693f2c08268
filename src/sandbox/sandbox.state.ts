import { createHash, randomBytes } from 'node:crypto';

/**
 * In-memory state of the rewards-service emulator: accounts (each with its own fields, funding sources, products,
 * orders and rewards), registered developer apps, authorization codes, grants and tokens, a controllable clock.
 */
export interface SandboxField {
  id: string;
  label: string;
  data_type: 'Dropdown';
  data: { options: string[] };
  required: boolean;
  scope: 'REWARD';
}

export interface SandboxFundingSource {
  id: string;
  name: string;
  /** Remaining funds; null is unlimited. */
  balance: number | null;
}

export interface SandboxProduct {
  id: string;
  name: string;
  currency_codes: string[];
  min_denomination: number;
  max_denomination: number;
}

export interface SandboxReward {
  id: string;
  order_id: string;
  created_at: string;
  value: { denomination: number; currency_code: string };
  delivery: { method: 'EMAIL'; status: 'PENDING' };
  recipient: { name: string; email: string };
  products: string[];
  custom_fields: { id: string; value: string; label: string }[];
}

export interface SandboxOrder {
  id: string;
  external_id: string | null;
  status: 'EXECUTED';
  created_at: string;
  payment: { funding_source_id: string; subtotal: number; fees: number; total: number };
  rewards: SandboxReward[];
}

export interface SandboxAccount {
  id: string;
  name: string;
  /** An account API key (spec §5: `Authorization: Bearer <API_KEY>` on the caller's own account). */
  apiKey: string;
  fields: SandboxField[];
  fundingSources: Map<string, SandboxFundingSource>;
  products: Map<string, SandboxProduct>;
  orders: Map<string, SandboxOrder>;
  ordersByExternalId: Map<string, { order: SandboxOrder; payloadHash: string }>;
  /** Chronological; listings read it newest first. */
  rewards: SandboxReward[];
  rewardsById: Map<string, SandboxReward>;
}

export interface SandboxClient {
  clientId: string;
  clientSecret: string;
  redirectUris: string[];
  name: string;
}

export interface AuthorizationCode {
  clientId: string;
  redirectUri: string;
  accountId: string;
  scopes: string[];
  expiresAt: number;
  used: boolean;
  codeChallenge?: string;
  /** The grant the code was exchanged for: revoked if the code is presented again (RFC 6749 §4.1.2). */
  grantId?: string;
}

export interface Grant {
  id: string;
  accountId: string;
  clientId: string;
  scopes: string[];
  revoked: boolean;
  revokedReason?: string;
  refreshCount: number;
  currentRefreshToken: string;
  accessTokens: Set<string>;
}

export interface AccessToken {
  grantId: string;
  expiresAtMs: number;
}

export interface SeedAccount {
  id: string;
  name: string;
  api_key?: string;
  fields: (Omit<SandboxField, 'scope' | 'data_type'> & Partial<Pick<SandboxField, 'scope' | 'data_type'>>)[];
  funding_sources: SandboxFundingSource[];
  products: SandboxProduct[];
}

export const SCOPES = ['default', 'team_management'] as const;

export function randomId(prefix: string, bytes = 9): string {
  return `${prefix}_${randomBytes(bytes).toString('base64url')}`;
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

/** `2026-11-22 10:15:30 UTC`, the form the service uses for `created_at`. */
export function serviceTimestamp(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

export const DEMO_ACCOUNT_ID = 'acc_demo';

export function demoSeed(): SeedAccount[] {
  return [
    {
      id: DEMO_ACCOUNT_ID,
      name: 'Demo Rewards Co',
      api_key: 'sbx_account_demo_key_0000000000000000',
      fields: [
        { id: 'fld_department', label: 'Department', data: { options: ['Sales', 'Engineering', 'Support', 'Marketing'] }, required: true },
        { id: 'fld_campaign', label: 'Campaign', data: { options: ['Q4 Kudos', 'Referral', 'Onboarding', 'Anniversary'] }, required: false },
        { id: 'fld_region', label: 'Region', data: { options: ['EMEA', 'AMER', 'APAC'] }, required: false },
      ],
      funding_sources: [
        { id: 'fs_demo_main', name: 'Main balance', balance: 10_000_000 },
        { id: 'fs_demo_small', name: 'Petty cash', balance: 100 },
      ],
      products: [
        { id: 'prod_amazon_us', name: 'Amazon.com Gift Card', currency_codes: ['USD'], min_denomination: 1, max_denomination: 2000 },
        { id: 'prod_visa_prepaid', name: 'Visa Prepaid Card', currency_codes: ['USD'], min_denomination: 5, max_denomination: 1000 },
        { id: 'prod_choice', name: 'Reward Choice', currency_codes: ['USD', 'EUR', 'GBP'], min_denomination: 1, max_denomination: 5000 },
      ],
    },
    {
      id: 'acc_other',
      name: 'Other Test Account',
      api_key: 'sbx_account_other_key_000000000000000',
      fields: [{ id: 'fld_team', label: 'Team', data: { options: ['Red', 'Blue'] }, required: false }],
      funding_sources: [{ id: 'fs_other_main', name: 'Main balance', balance: 1_000_000 }],
      products: [{ id: 'prod_choice', name: 'Reward Choice', currency_codes: ['USD', 'EUR'], min_denomination: 1, max_denomination: 5000 }],
    },
  ];
}

export interface SandboxSettings {
  accessTokenTtlSeconds: number;
  codeTtlSeconds: number;
  autoApprove: boolean;
  autoApproveAccountId: string;
  /** False: refresh responses carry no new refresh_token and the old one stays usable (a non-rotating server). */
  rotateRefreshTokens: boolean;
}

export class SandboxState {
  accounts = new Map<string, SandboxAccount>();
  clients = new Map<string, SandboxClient>();
  codes = new Map<string, AuthorizationCode>();
  grants = new Map<string, Grant>();
  accessTokens = new Map<string, AccessToken>();
  /** refresh token → grant id and whether it was used */
  refreshTokens = new Map<string, { grantId: string; used: boolean }>();
  apiKeys = new Map<string, string>();
  pendingConsents = new Map<string, { clientId: string; redirectUri: string; scopes: string[]; state?: string; codeChallenge?: string; expiresAt: number }>();
  calls = new Map<string, number>();
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

  reset(seed: SeedAccount[] = demoSeed()): void {
    this.accounts.clear();
    this.apiKeys.clear();
    this.codes.clear();
    this.grants.clear();
    this.accessTokens.clear();
    this.refreshTokens.clear();
    this.pendingConsents.clear();
    this.calls.clear();
    this.clockOffsetMs = 0;
    this.settings = {
      accessTokenTtlSeconds: 7200,
      codeTtlSeconds: 120,
      autoApprove: false,
      autoApproveAccountId: DEMO_ACCOUNT_ID,
      rotateRefreshTokens: true,
      ...this.initialSettings,
    };
    this.clients = new Map(this.initialClients.map((c) => [c.clientId, { ...c }]));
    for (const account of seed) this.upsertAccount(account);
  }

  upsertAccount(seed: SeedAccount): SandboxAccount {
    const previous = this.accounts.get(seed.id);
    if (previous) this.apiKeys.delete(previous.apiKey);
    const account: SandboxAccount = {
      id: seed.id,
      name: seed.name,
      apiKey: seed.api_key ?? randomId('sbx_account', 24),
      fields: seed.fields.map((f) => ({ scope: 'REWARD', data_type: 'Dropdown', ...f, data: { options: [...f.data.options] } })),
      fundingSources: new Map(seed.funding_sources.map((f) => [f.id, { ...f }])),
      products: new Map(seed.products.map((p) => [p.id, { ...p }])),
      orders: previous?.orders ?? new Map(),
      ordersByExternalId: previous?.ordersByExternalId ?? new Map(),
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
