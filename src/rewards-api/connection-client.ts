import type { RewardsConfig, RewardsEnvironment, RewardsEnvironmentConfig } from '../config/app-config';
import { API_CALL_TIMEOUT_MS, type ApiResponse, type RewardsApiClient } from './rewards-api.client';
import type { AccountPacer, Priority } from './account-pacer';
import { RewardsApiError } from './rewards-api.errors';
import type {
  OrderRequest,
  UpstreamOrder,
  UpstreamReward,
  UpstreamOrganization,
  UpstreamRewardDetail,
  UpstreamWebhook,
} from './rewards-api.types';

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
  /** This client's requests take their slots one after another (bulk work never holds more than one ahead). */
  private pacingTurn: Promise<void> = Promise.resolve();

  constructor(
    private readonly http: RewardsApiClient,
    private readonly tokens: TokenSource,
    private readonly environments: RewardsConfig,
    readonly connectionId: string,
    private readonly pacer: AccountPacer | null = null,
    readonly priority: Priority = 'interactive',
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

  /**
   * `POST /webhooks {url}`: registers (or, when the account has one, re-points) the account's webhook. The answer
   * carries the webhook's private key: the caller stores it encrypted and never logs it.
   */
  async registerWebhook(url: string, timeoutMs = API_CALL_TIMEOUT_MS): Promise<UpstreamWebhook> {
    const res = await this.call<{ webhook?: Partial<UpstreamWebhook> }>(
      'POST',
      '/webhooks',
      { url },
      timeoutMs,
    );
    const w = res.body.webhook;
    if (!w || typeof w.id !== 'string' || !w.id || typeof w.private_key !== 'string' || !w.private_key)
      throw new RewardsApiError('transient', `the rewards service answered ${res.status} without a webhook`);
    return { id: w.id, url: typeof w.url === 'string' ? w.url : url, private_key: w.private_key };
  }

  /** `GET /rewards/{id}`: the reward with its `delivery.status`. */
  async getReward(id: string, timeoutMs = API_CALL_TIMEOUT_MS): Promise<UpstreamRewardDetail> {
    const res = await this.call<{ reward?: UpstreamRewardDetail }>(
      'GET',
      `/rewards/${encodeURIComponent(id)}`,
      undefined,
      timeoutMs,
    );
    const reward = res.body.reward;
    if (!reward || typeof reward.id !== 'string')
      throw new RewardsApiError('transient', `the rewards service answered ${res.status} without a reward`);
    return reward;
  }

  /**
   * `GET /organizations`: the cheapest authenticated call, used as a probe. The list holds only the organization the
   * token belongs to: that one is returned (null when the answer does not name exactly one).
   */
  async probe(timeoutMs = 10_000): Promise<UpstreamOrganization | null> {
    const res = await this.call<{ organizations?: unknown }>('GET', '/organizations', undefined, timeoutMs);
    return onlyOrganization(res.body.organizations);
  }

  /**
   * Every request of the account — orders, fields, listings, probes, and the retry after a 401 — takes a slot from
   * the account's pacer right before it goes out. A 429 that happens anyway slows the account down and is retried
   * (up to MAX_THROTTLED_RETRIES times) without surfacing as a failure.
   */
  private call<T>(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    timeoutMs = API_CALL_TIMEOUT_MS,
  ): Promise<ApiResponse<T>> {
    return this.tokens.withToken(this.connectionId, async (token) => {
      const env = this.environment(token.environment);
      for (let throttled = 0; ; throttled += 1) {
        await this.pace(env);
        try {
          return await this.http.call<T>(env, token.token, method, path, body, timeoutMs);
        } catch (error) {
          if (!this.paced(env) || !isThrottled(error) || throttled >= MAX_THROTTLED_RETRIES) throw error;
          await this.pacer?.throttled(this.connectionId, (error.retryAfterSeconds ?? 1) * 1000);
        }
      }
    });
  }

  private paced(env: RewardsEnvironmentConfig): boolean {
    return this.pacer !== null && env.pacing.rps > 0;
  }

  private pace(env: RewardsEnvironmentConfig): Promise<void> {
    if (!this.paced(env)) return Promise.resolve();
    const turn = this.pacingTurn.then(() =>
      this.pacer?.acquire(this.connectionId, env.pacing, this.priority),
    );
    this.pacingTurn = turn.catch(() => undefined);
    return turn;
  }

  private environment(name: RewardsEnvironment): RewardsEnvironmentConfig {
    const env = this.environments[name];
    if (!env)
      throw new RewardsApiError('rejected', `the ${name} environment is not configured on this gateway`);
    return env;
  }
}

/** 429s retried inside one call before it surfaces as `upstream_rate_limited` (the work is then queued). */
const MAX_THROTTLED_RETRIES = 5;

function isThrottled(error: unknown): error is RewardsApiError {
  return error instanceof RewardsApiError && error.status === 429;
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

/** The one organization of a `GET /organizations` list; null for none, several, or one without a usable id. */
export function onlyOrganization(list: unknown): UpstreamOrganization | null {
  if (!Array.isArray(list) || list.length !== 1) return null;
  const org = list[0] as { id?: unknown; name?: unknown } | null;
  if (!org || typeof org.id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(org.id)) return null;
  return { id: org.id, name: typeof org.name === 'string' ? org.name.slice(0, 200) : null };
}
