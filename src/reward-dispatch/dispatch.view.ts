import type { RewardsEnvironment } from '../config/app-config';
import type { ResolvedCustomField } from '../fields-cache/custom-fields';

export type DispatchStatus = 'sending' | 'queued' | 'sent' | 'failed';

export interface UpstreamReward {
  id: string;
  value: { denomination: number; currency_code: string };
  recipient: { name: string; email: string };
  products?: string[];
  delivery?: { method: string; status: string };
  custom_fields?: { id: string; value: string; label: string }[];
  created_at?: string;
}

export interface UpstreamOrder {
  id: string;
  external_id: string | null;
  status: string;
  rewards: UpstreamReward[];
}

export interface UpstreamPayload {
  external_id: string;
  payment: { funding_source_id: string };
  rewards: {
    value: { denomination: number; currency_code: string };
    delivery: { method: string };
    recipient: { name: string; email: string };
    products: string[];
    custom_fields: { id: string; value: string }[];
  }[];
}

export interface DispatchRow {
  id: string;
  tenant_id: string;
  connection_id: string | null;
  environment: RewardsEnvironment;
  idempotency_key: string;
  request_hash: string;
  request: { external_reference: string | null; funding_source_id: string; custom_fields: ResolvedCustomField[][] };
  upstream_payload: UpstreamPayload;
  status: DispatchStatus;
  attempts: number;
  next_attempt_at: Date | null;
  lease_until: Date | null;
  upstream_order_id: string | null;
  upstream_order: UpstreamOrder | null;
  last_error: Record<string, unknown> | null;
  response_status: number | null;
  response_body: unknown;
  created_at: Date;
  updated_at: Date;
  sent_at: Date | null;
}

const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : null);

/** The dispatch as the API shows it: rewards with upstream ids once sent, custom fields always with labels. */
export function toView(row: DispatchRow) {
  const requested = row.upstream_payload.rewards;
  const sentRewards = row.upstream_order?.rewards ?? [];
  return {
    id: row.id,
    status: row.status,
    environment: row.environment,
    idempotency_key: row.idempotency_key,
    external_reference: row.request.external_reference,
    funding_source_id: row.request.funding_source_id,
    upstream_order_id: row.upstream_order_id,
    attempts: row.attempts,
    next_attempt_at: row.status === 'queued' ? iso(row.next_attempt_at) : null,
    last_error: row.last_error,
    created_at: iso(row.created_at),
    sent_at: iso(row.sent_at),
    rewards: requested.map((r, i) => ({
      id: sentRewards[i]?.id ?? null,
      recipient: r.recipient,
      value: r.value,
      products: r.products,
      delivery: sentRewards[i]?.delivery ?? { method: r.delivery.method, status: null },
      custom_fields: sentRewards[i]?.custom_fields ?? row.request.custom_fields[i] ?? [],
    })),
  };
}
