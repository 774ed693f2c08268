/**
 * The rewards service's resources as the gateway reads them (spec note §1–2). Only what the gateway uses is typed;
 * unknown enum values are tolerated (the service adds new ones).
 */
export interface UpstreamReward {
  id: string;
  order_id?: string;
  value: { denomination: number; currency_code: string };
  recipient: { name?: string | null; email?: string | null; phone?: string | null };
  products?: string[];
  delivery?: { method: string; status: string; link?: string };
  custom_fields?: { id: string; value: string | null; label: string }[];
  created_at?: string;
}

export interface UpstreamOrder {
  id: string;
  external_id: string | null;
  status: string;
  rewards: UpstreamReward[];
}

/** One reward as it goes upstream (inside `reward` in the single form, an item of `rewards` in the array form). */
export interface UpstreamRewardSpec {
  value: { denomination: number; currency_code: string };
  delivery: { method: DeliveryMethod };
  recipient: { name: string; email?: string; phone?: string };
  products?: string[];
  campaign_id?: string;
  custom_fields: { id: string; value: string }[];
}

export type DeliveryMethod = 'EMAIL' | 'LINK' | 'PHONE';
export const DELIVERY_METHODS: readonly DeliveryMethod[] = ['EMAIL', 'LINK', 'PHONE'];

/** `POST /api/v2/orders`: the current form (one `reward`) or the older one (`rewards: [...]`). */
export type OrderRequest =
  | { external_id: string; payment: { funding_source_id: string }; reward: UpstreamRewardSpec }
  | { external_id: string; payment: { funding_source_id: string }; rewards: UpstreamRewardSpec[] };

/** What an order's `status` means for the rewards in it. */
export type OrderOutcome = 'executed' | 'held' | 'failed';

/**
 * `EXECUTED` → executed. `CANCELED` / `FAILED` → failed (rejected by an approver, or not paid). Every other status —
 * `PENDING APPROVAL`, `PENDING INTERNAL PAYMENT APPROVAL`, `PENDING SETTLEMENT`, `OPEN`, or one added later — means the
 * order exists but has not been executed yet: held, and checked again until it settles. Whatever the HTTP code.
 */
export function orderOutcome(status: string | undefined): OrderOutcome {
  const s = (status ?? '').toUpperCase();
  if (s === 'EXECUTED') return 'executed';
  if (s === 'CANCELED' || s === 'CANCELLED' || s === 'FAILED') return 'failed';
  return 'held';
}

/** `POST /webhooks` → `{webhook: {...}}`: the account's one webhook (a second POST changes its URL, same id and key). */
export interface UpstreamWebhook {
  id: string;
  url: string;
  /** The HMAC-SHA256 key of `Tremendous-Webhook-Signature`. Secret: stored only encrypted, never logged. */
  private_key: string;
}

/** `GET /rewards/{id}` → `{reward: {...}}`; `delivery.status`: SCHEDULED, PENDING, SUCCEEDED, FAILED or a newer value. */
export type UpstreamRewardDetail = UpstreamReward & {
  delivery?: { method: string; status: string; failure_reason?: string };
};

/** The organization a token belongs to (`GET /organizations` lists only that one): its id, and its name for display. */
export interface UpstreamOrganization {
  id: string;
  name: string | null;
}
