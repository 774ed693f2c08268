import type { AppConfig, RewardsEnvironment, RewardsEnvironmentConfig } from '../config/app-config';
import { API_CALL_TIMEOUT_MS, type ApiResponse, type RewardsApiClient } from './rewards-api.client';
import { RewardsApiError } from './rewards-api.errors';
import type { OrderRequest, UpstreamOrder, UpstreamReward } from './rewards-api.types';

/** A bearer token of one connection, and the environment it belongs to. */
export interface ConnectionToken {
  token: string;
  environment: RewardsEnvironment;
}

/**
 * Where a connection's tokens come from (the token vault): runs `call` with a valid token, and on a 401 retries once
 * with a newer or force-refreshed one. Declared here so this module does not depend on the vault.
 */
export interface TokenSource {
  withToken<T>(connectionId: string, call: (token: ConnectionToken) => Promise<T>): Promise<T>;
}

export interface UpstreamField {
  id: string;
  label: string;
  data_type: string;
  data?: { options?: unknown };
  required?: boolean;
}

/**
 * The rewards service as seen by one connection: `rewardsApi.forConnection(id).createOrder(order)`. Token lookup,
 * the retry after a 401, the environment's base URL, timeouts and latency metrics live here once; callers get typed
 * results or a RewardsApiError (mapped to our codes by `mapUpstreamError`).
 */
export class ConnectionClient {
  constructor(
    private readonly http: RewardsApiClient,
    private readonly tokens: TokenSource,
    private readonly environments: AppConfig['rewards'],
    readonly connectionId: string,
  ) {}

  /** `POST /orders`. 200 = a new order, 201 = the existing order for this external_id (same payload). */
  async createOrder(
    order: OrderRequest,
    timeoutMs = API_CALL_TIMEOUT_MS,
  ): Promise<{ status: number; order: UpstreamOrder }> {
    const res = await this.call<{ order?: UpstreamOrder }>('POST', '/orders', order, timeoutMs);
    return { status: res.status, order: requireOrder(res.body.order, res.status) };
  }

  /** `GET /orders/{id}`; `id` may also be the order's external_id. */
  async getOrder(id: string, timeoutMs = API_CALL_TIMEOUT_MS): Promise<UpstreamOrder> {
    const res = await this.call<{ order?: UpstreamOrder }>(
      'GET',
      `/orders/${encodeURIComponent(id)}`,
      undefined,
      timeoutMs,
    );
    return requireOrder(res.body.order, res.status);
  }

  async listRewards(
    params: URLSearchParams,
  ): Promise<{ rewards: UpstreamReward[]; total_count: number | null }> {
    const res = await this.call<{ rewards?: UpstreamReward[]; total_count?: number }>(
      'GET',
      `/rewards?${params.toString()}`,
    );
    return {
      rewards: Array.isArray(res.body.rewards) ? res.body.rewards : [],
      total_count: typeof res.body.total_count === 'number' ? res.body.total_count : null,
    };
  }

  async listFields(): Promise<UpstreamField[]> {
    const res = await this.call<{ fields?: UpstreamField[] }>('GET', '/fields');
    if (!Array.isArray(res.body.fields))
      throw new RewardsApiError('transient', 'fields response without a fields list', res.status);
    return res.body.fields;
  }

  /** `GET /organizations`: the cheapest authenticated call, used as a probe. */
  async probe(timeoutMs = 10_000): Promise<void> {
    await this.call('GET', '/organizations', undefined, timeoutMs);
  }

  private call<T>(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    timeoutMs = API_CALL_TIMEOUT_MS,
  ): Promise<ApiResponse<T>> {
    return this.tokens.withToken(this.connectionId, (token) =>
      this.http.call<T>(this.environment(token.environment), token.token, method, path, body, timeoutMs),
    );
  }

  private environment(name: RewardsEnvironment): RewardsEnvironmentConfig {
    const env = this.environments[name];
    if (!env)
      throw new RewardsApiError('rejected', `the ${name} environment is not configured on this gateway`);
    return env;
  }
}

/** A 2xx without a usable order cannot be trusted: treat it as an unknown outcome (a retry is deduplicated). */
function requireOrder(order: UpstreamOrder | undefined, status: number): UpstreamOrder {
  if (!order || typeof order.id !== 'string' || !Array.isArray(order.rewards)) {
    throw new RewardsApiError(
      'transient',
      `the rewards service answered ${status} without an order`,
      status,
      null,
      null,
      true,
    );
  }
  return order;
}
