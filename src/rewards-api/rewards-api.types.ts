/** The rewards service's resources, as far as the gateway uses them (unknown enum values are tolerated). */
export interface UpstreamReward {
  id: string;
  order_id?: string;
  value: { denomination: number; currency_code: string };
  recipient: { name?: string | null; email?: string | null; phone?: string | null };
  products?: string[];
  /** `status`: SCHEDULED, PENDING, SUCCEEDED, FAILED or a newer value; `failure_reason` on `GET /rewards/{id}`. */
  delivery?: { method: string; status: string; link?: string; failure_reason?: string };
  custom_fields?: { id: string; value: string | null; label: string }[];
  created_at?: string;
}

export interface UpstreamOrder {
  id: string;
  external_id: string | null;
  status: string;
  rewards: UpstreamReward[];
}

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

/**
 * What an order's `status` means for its rewards: `EXECUTED` executed, `CANCELED` / `FAILED` failed; any other
 * (pending approval or settlement, `OPEN`, a newer one) held, and checked again until it settles.
 */
export function orderOutcome(status: string | undefined): 'executed' | 'held' | 'failed' {
  const s = (status ?? '').toUpperCase();
  if (s === 'EXECUTED') return 'executed';
  if (s === 'CANCELED' || s === 'CANCELLED' || s === 'FAILED') return 'failed';
  return 'held';
}

/** The account's one webhook (a second POST changes its URL, same id and key). */
export interface UpstreamWebhook {
  id: string;
  url: string;
  /** The HMAC key of `Tremendous-Webhook-Signature`: stored only encrypted, never logged. */
  private_key: string;
}

export interface UpstreamOrganization {
  id: string;
  name: string | null;
}
