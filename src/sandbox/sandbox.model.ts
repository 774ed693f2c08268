import { createHash, hash, randomBytes } from 'node:crypto';

/**
 * The emulator's data model: accounts (each with its own fields, funding sources, products, campaigns, orders and
 * rewards), registered developer apps, authorization codes, grants and tokens — and the id formats of the service.
 */

/** The ten custom-field data types of the current service (spec §2). */
export const FIELD_DATA_TYPES = [
  'Checkbox',
  'Currency',
  'Date',
  'Dropdown',
  'Email',
  'List',
  'Number',
  'Phone',
  'Text',
  'TextArea',
] as const;
export type FieldDataType = (typeof FIELD_DATA_TYPES)[number];
/** The types whose values come from `data.options`. */
export const OPTION_TYPES: readonly FieldDataType[] = ['Dropdown', 'List'];

export interface SandboxField {
  id: string;
  label: string;
  data_type: FieldDataType;
  /** `{options, labels?}` for Dropdown and List; `{}` for the other types. */
  data: { options?: string[]; labels?: Record<string, string> };
  required: boolean;
  scope: 'REWARD';
}

export const FUNDING_METHODS = ['balance', 'credit_card', 'invoice', 'bank_account'] as const;
export type FundingMethod = (typeof FUNDING_METHODS)[number];

export interface SandboxFundingSource {
  id: string;
  name: string;
  method: FundingMethod;
  /** Remaining funds in USD; null is unlimited. */
  balance: number | null;
}

export interface SandboxProduct {
  id: string;
  name: string;
  currency_codes: string[];
  min_denomination: number;
  max_denomination: number;
}

export interface SandboxCampaign {
  id: string;
  name: string;
  description: string;
  products: string[];
}

export type DeliveryMethod = 'EMAIL' | 'LINK' | 'PHONE';
export type DeliveryStatus = 'SCHEDULED' | 'PENDING' | 'SUCCEEDED' | 'FAILED';
export type OrderStatus = 'EXECUTED' | 'PENDING APPROVAL' | 'CANCELED';

export interface SandboxReward {
  id: string;
  order_id: string;
  created_at: string;
  expires_at: string | null;
  deliver_at: string | null;
  value: { denomination: number; currency_code: string };
  recipient: { name: string; email?: string; phone?: string };
  custom_fields: { id: string; value: string; label: string }[];
  delivery: { method: DeliveryMethod; status: DeliveryStatus };
}

export interface SandboxOrder {
  id: string;
  external_id: string | null;
  campaign_id: string | null;
  created_at: string;
  createdAtMs: number;
  status: OrderStatus;
  rewards: SandboxReward[];
  /** Sandbox-internal: the funding source charged (a real id, or `INVOICE`); not shown by the API. */
  fundingSourceId: string;
  subtotal: number;
  currencyCode: string;
}

export interface SandboxAccount {
  id: string;
  name: string;
  /** The organization id `/organizations` shows: 12 characters, derived from the account id. */
  organizationId: string;
  /** An account API key (`Authorization: Bearer <API_KEY>` on the caller's own account). */
  apiKey: string;
  /** Orders wait in `PENDING APPROVAL` until approved or rejected. */
  approvalsRequired: boolean;
  fields: SandboxField[];
  fundingSources: Map<string, SandboxFundingSource>;
  products: Map<string, SandboxProduct>;
  campaigns: Map<string, SandboxCampaign>;
  orders: Map<string, SandboxOrder>;
  ordersByExternalId: Map<string, { order: SandboxOrder; payloadHash: string }>;
  /** Chronological; listings read them newest first. */
  orderList: SandboxOrder[];
  rewards: SandboxReward[];
  rewardsById: Map<string, SandboxReward>;
  /** The account's webhook (the service allows one per organization); events go to its URL. */
  webhook?: SandboxWebhook;
}

/** A registered webhook: `POST /webhooks` creates it, a second POST changes only its URL. */
export interface SandboxWebhook {
  /** `[A-Z0-9]{12}`, like the service's other ids. */
  id: string;
  url: string;
  /** The HMAC-SHA256 key of `Tremendous-Webhook-Signature` (shown by POST and GET /webhooks). */
  privateKey: string;
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

export interface PendingConsent {
  clientId: string;
  redirectUri: string;
  scopes: string[];
  state?: string;
  codeChallenge?: string;
  expiresAt: number;
}

export interface Grant {
  id: string;
  accountId: string;
  clientId: string;
  scopes: string[];
  revoked: boolean;
  revokedReason?: string;
  refreshCount: number;
  /** tokenKey of the refresh token in force. */
  currentRefreshToken: string;
  /** tokenKeys of the access tokens issued (bounded: SandboxLimits.accessTokensPerGrant). */
  accessTokens: Set<string>;
  /** tokenKeys of the newest used refresh tokens, oldest first (bounded: SandboxLimits.usedRefreshTokensPerGrant). */
  usedRefreshTokens: string[];
}

export interface AccessToken {
  grantId: string;
  expiresAtMs: number;
}

/** An account as seeded through `POST /__control/reset` or `PUT /__control/accounts/:id`. */
export interface SeedAccount {
  id: string;
  name: string;
  api_key?: string;
  approvals_required?: boolean;
  fields: {
    id: string;
    label: string;
    data_type?: FieldDataType;
    data?: SandboxField['data'];
    required: boolean;
    scope?: 'REWARD';
  }[];
  funding_sources: (Omit<SandboxFundingSource, 'method'> & { method?: FundingMethod })[];
  products: SandboxProduct[];
  campaigns?: { id: string; name: string; products: string[]; description?: string }[];
}

export const SCOPES = ['default', 'team_management'] as const;

/** Ids the service validates (campaigns, products, fields, funding sources): `[A-Z0-9]{4,20}`. */
export const SERVICE_ID = /^[A-Z0-9]{4,20}$/;

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** A random 12-character `[A-Z0-9]` id, the form of the service's order, reward and organization ids. */
export function serviceId(): string {
  let id = '';
  while (id.length < 12) {
    for (const byte of randomBytes(16)) {
      if (byte < 252 && id.length < 12) id += ID_ALPHABET[byte % 36]; // 252 = 7 × 36: no modulo bias
    }
  }
  return id;
}

/** A stable 12-character `[A-Z0-9]` id derived from a text (the organization id of an account). */
export function derivedServiceId(text: string): string {
  const digest = createHash('sha256').update(text).digest();
  return [...digest.subarray(0, 12)].map((byte) => ID_ALPHABET[byte % 36]).join('');
}

/** Sandbox-internal opaque values (tokens, codes, grants, consent requests). */
export function randomId(prefix: string, bytes = 9): string {
  return `${prefix}_${randomBytes(bytes).toString('base64url')}`;
}

export function sha256(text: string): string {
  return hash('sha256', text, 'base64url');
}

/** `2026-11-22 10:15:30 UTC`, the form the sandbox has always used for `created_at`. */
export function serviceTimestamp(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** The events the sandbox sends (and `GET /webhooks/:id/events` lists): a reward's delivery outcome. */
export const WEBHOOK_EVENTS = ['REWARDS.DELIVERY.SUCCEEDED', 'REWARDS.DELIVERY.FAILED'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** `meta.failure_reason` of `REWARDS.DELIVERY.FAILED` (spec §3), with `meta.retryable` for each. */
export const DELIVERY_FAILURE_REASONS = {
  apple_private_relay: false,
  domain_block: false,
  email_delivery_failed: true,
  invalid_domain: false,
  invalid_email: false,
  mailbox_unavailable: true,
  sms_delivery_failed: true,
  smtp_delivery_failed: true,
  spam_report: false,
} as const satisfies Record<string, boolean>;
export type DeliveryFailureReason = keyof typeof DELIVERY_FAILURE_REASONS;

/** Which OAuth scope the `/webhooks` routes need: DOCS versions put webhooks under `default` or `team_management`. */
export type WebhookScope = 'any' | 'default' | 'team_management';

/** How the sandbox delivers rewards and sends their webhook events (`/__control/webhooks`). */
export interface SandboxWebhookSettings {
  /** Send events to registered webhooks. Off: rewards are still delivered (their status changes), nothing is sent. */
  enabled: boolean;
  /** From an order's execution (created, or approved) to its EMAIL/PHONE rewards' delivery outcome. */
  delayMs: number;
  /** Recipients (e-mail address or phone number, case-insensitive) whose deliveries fail. */
  failRecipients: string[];
  /** Share (0–1) of the other deliveries that fail, at random. */
  failureRatio: number;
  /** `meta.failure_reason` of a failure; unset: `email_delivery_failed` (EMAIL), `sms_delivery_failed` (PHONE). */
  failureReason?: DeliveryFailureReason;
  /** Send every event twice (the same `uuid` and body): for receivers' de-duplication. */
  duplicate: boolean;
  /** After each outcome's event, also send the opposite outcome with an older `created_utc` (a stale event). */
  outOfOrder: boolean;
  /** Attempts per event (the first included) while the receiver answers other than 2xx or not at all. */
  maxAttempts: number;
  /** Wait before the second attempt; doubles per attempt, at most WEBHOOK_RETRY_MAX_MS. */
  retryBaseMs: number;
  /** Each attempt is abandoned after this long. */
  timeoutMs: number;
  /** The OAuth scope `/webhooks` needs (an account API key has every scope). */
  scope: WebhookScope;
}

export const DEFAULT_WEBHOOK_SETTINGS: Readonly<SandboxWebhookSettings> = {
  enabled: true,
  delayMs: 2000,
  failRecipients: [],
  failureRatio: 0,
  duplicate: false,
  outOfOrder: false,
  maxAttempts: 4,
  retryBaseMs: 1000,
  timeoutMs: 5000,
  scope: 'any',
};

/** The longest wait between two attempts of one event. */
export const WEBHOOK_RETRY_MAX_MS = 60_000;
