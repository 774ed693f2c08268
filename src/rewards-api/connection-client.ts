import { performance } from 'node:perf_hooks';
import type { RewardsConfig, RewardsEnvironment, RewardsEnvironmentConfig } from '../config/app-config';
import { API_CALL_TIMEOUT_MS, type ApiResponse, type RewardsApiClient } from './rewards-api.client';
import type { AccountPacer, Priority, Slot } from './account-pacer';
import { type CallRecorder, operationOf, recorded } from './call-recorder';
import { RewardsApiError } from './rewards-api.errors';
import { span } from '../common/tracing';
import type { Clock } from '../common/clock';
import type {
  OrderRequest,
  UpstreamOrder,
  UpstreamReward,
  UpstreamOrganization,
  UpstreamWebhook,
} from './rewards-api.types';

/** A bearer token of one connection: its generation (bumped by every refresh) and expiry (ms since the epoch). */
export interface ConnectionToken {
  token: string;
  generation: number;
  expiresAt: number;
}

/** Where a connection's tokens come from (the token vault; declared here so this module does not depend on it). */
export interface TokenSource {
  environmentOf(connectionId: string): Promise<RewardsEnvironment>;
  getAccessToken(connectionId: string): Promise<ConnectionToken>;
  /**
   * `used` was answered 401 at `answeredAt`: resolves when the request may go again, returning the next
   * `refusedBefore`; throws when the grant itself is refused.
   */
  unauthorized(
    connectionId: string,
    used: ConnectionToken,
    answeredAt: number,
    refusedBefore: number | null,
  ): Promise<number | null>;
}

export interface UpstreamField {
  id: string;
  label: string;
  data_type: string;
  data?: { options?: unknown };
  required?: boolean;
}

/**
 * The rewards service as seen by one connection (`rewardsApi.forConnection(id).createOrder(order)`): token, the retry
 * after a 401 or a 429, pacing, base URL; callers get typed results or a RewardsApiError.
 */
export class ConnectionClient {
  /** This client's requests take their slots one after another (bulk work never holds more than one ahead). */
  private pacingTurn: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly http: RewardsApiClient,
    private readonly tokens: TokenSource,
    private readonly environments: RewardsConfig,
    readonly connectionId: string,
    private readonly clock: Clock,
    private readonly pacer: AccountPacer | null = null,
    readonly priority: Priority = 'interactive',
    /** Epoch ms when an interactive caller stops waiting: a slot further out throws SlotTooFarError. */
    private readonly waitUntil: number | null = null,
    /** The connection activity; none for a grant not stored yet. */
    private readonly recorder: CallRecorder | null = null,
  ) {}

  /** `POST /orders`. 200 = a new order, 201 = the existing order for this external_id (same payload). */
  async createOrder(
    order: OrderRequest,
    timeoutMs = API_CALL_TIMEOUT_MS,
  ): Promise<{ status: number; order: UpstreamOrder }> {
    const res = await this.call<{ order?: UpstreamOrder }>('/orders', timeoutMs, order);
    return { status: res.status, order: requireOrder(res.body.order, res.status) };
  }

  /** `GET /orders/{id}`; `id` may also be the order's external_id. */
  async getOrder(id: string, timeoutMs = API_CALL_TIMEOUT_MS): Promise<UpstreamOrder> {
    const res = await this.call<{ order?: UpstreamOrder }>(`/orders/${encodeURIComponent(id)}`, timeoutMs);
    return requireOrder(res.body.order, res.status);
  }

  async listRewards(
    params: URLSearchParams,
  ): Promise<{ rewards: UpstreamReward[]; total_count: number | null }> {
    const res = await this.call<{ rewards?: UpstreamReward[]; total_count?: number }>(`/rewards?${params}`);
    return {
      rewards: Array.isArray(res.body.rewards) ? res.body.rewards : [],
      total_count: typeof res.body.total_count === 'number' ? res.body.total_count : null,
    };
  }

  async listFields(): Promise<UpstreamField[]> {
    const res = await this.call<{ fields?: UpstreamField[] }>('/fields');
    if (!Array.isArray(res.body.fields))
      throw new RewardsApiError('transient', 'fields response without a fields list', res.status);
    return res.body.fields;
  }

  /** `POST /webhooks {url}`: registers or re-points the account's webhook; its private key is secret. */
  async registerWebhook(url: string, timeoutMs = API_CALL_TIMEOUT_MS): Promise<UpstreamWebhook> {
    const res = await this.call<{ webhook?: Partial<UpstreamWebhook> }>('/webhooks', timeoutMs, { url });
    const w = res.body.webhook;
    if (!w || typeof w.id !== 'string' || !w.id || typeof w.private_key !== 'string' || !w.private_key)
      throw new RewardsApiError('transient', `the rewards service answered ${res.status} without a webhook`);
    return { id: w.id, url: typeof w.url === 'string' ? w.url : url, private_key: w.private_key };
  }

  async getReward(id: string, timeoutMs = API_CALL_TIMEOUT_MS): Promise<UpstreamReward> {
    const res = await this.call<{ reward?: UpstreamReward }>(`/rewards/${encodeURIComponent(id)}`, timeoutMs);
    const reward = res.body.reward;
    if (!reward || typeof reward.id !== 'string')
      throw new RewardsApiError('transient', `the rewards service answered ${res.status} without a reward`);
    return reward;
  }

  /** `GET /organizations` (the cheapest authenticated call): the token's organization, or null if not exactly one. */
  async probe(timeoutMs = 10_000): Promise<UpstreamOrganization | null> {
    const res = await this.call<{ organizations?: unknown }>('/organizations', timeoutMs);
    return onlyOrganization(res.body.organizations);
  }

  /**
   * One request, in attempts: each takes a pacing slot, then reads the token (never held across a wait). A 401 goes
   * to the vault, which refreshes or declares the grant refused; a 429 slows the account down and is retried.
   * A POST when it has a body.
   */
  private async call<T>(
    path: string,
    timeoutMs = API_CALL_TIMEOUT_MS,
    body?: unknown,
  ): Promise<ApiResponse<T>> {
    const method = body === undefined ? 'GET' : 'POST';
    const name = await this.tokens.environmentOf(this.connectionId);
    const env = this.environments[name];
    if (!env)
      throw new RewardsApiError('rejected', `the ${name} environment is not configured on this gateway`);
    let throttled = 0;
    let unauthorized = 0;
    let refusedBefore: number | null = null;
    let attempt = 0;
    for (;;) {
      const { token, pacingWaitMs } = await this.slotThenToken(env);
      try {
        return await recorded(
          this.recorder,
          {
            connectionId: this.connectionId,
            operation: operationOf(method, path),
            attempt: ++attempt,
            throttled,
            pacingWaitMs,
          },
          () => this.http.call<T>(env, token.token, method, path, body, timeoutMs),
        );
      } catch (error) {
        if (!(error instanceof RewardsApiError)) throw error;
        if (error.kind === 'unauthorized') {
          // 401 after 401 without a verdict on the grant: worth trying again later.
          if (++unauthorized > MAX_UNAUTHORIZED_RETRIES)
            throw new RewardsApiError(
              'transient',
              `the rewards service answered 401 to ${MAX_UNAUTHORIZED_RETRIES + 1} tokens in a row (${error.message})`,
              401,
              error.body,
            );
          refusedBefore = await span(
            'token',
            () => this.tokens.unauthorized(this.connectionId, token, this.clock.now(), refusedBefore),
            { 'token.after_401': true },
          );
          continue;
        }
        if (!this.paced(env) || error.status !== 429 || ++throttled > MAX_THROTTLED_RETRIES) throw error;
        await this.pacer?.throttled(this.connectionId, (error.retryAfterSeconds ?? 1) * 1000);
      }
    }
  }

  /** The account's next slot, then the token (a new slot if reading it missed the slot); and the wait in ms. */
  private async slotThenToken(
    env: RewardsEnvironmentConfig,
  ): Promise<{ token: ConnectionToken; pacingWaitMs: number }> {
    let pacingWaitMs = 0;
    for (;;) {
      const asked = performance.now();
      const slot = await span('pacing.wait', () => this.pace(env));
      pacingWaitMs += performance.now() - asked;
      const token = await span('token', () => this.tokens.getAccessToken(this.connectionId));
      if (!slot || !this.pacer?.missed(slot)) return { token, pacingWaitMs };
    }
  }

  private paced(env: RewardsEnvironmentConfig): boolean {
    return this.pacer !== null && env.pacing.rps > 0;
  }

  private pace(env: RewardsEnvironmentConfig): Promise<Slot | null> {
    const pacer = this.pacer;
    if (!pacer || !this.paced(env)) return Promise.resolve(null);
    const turn = this.pacingTurn.then(() =>
      pacer.acquire(
        this.connectionId,
        env.pacing,
        this.priority,
        this.waitUntil === null ? null : Math.max(0, this.waitUntil - this.clock.now()),
      ),
    );
    this.pacingTurn = turn.catch(() => undefined);
    return turn;
  }
}

const MAX_THROTTLED_RETRIES = 5;
const MAX_UNAUTHORIZED_RETRIES = 3;

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
function onlyOrganization(list: unknown): UpstreamOrganization | null {
  if (!Array.isArray(list) || list.length !== 1) return null;
  const org = list[0] as { id?: unknown; name?: unknown } | null;
  if (!org || typeof org.id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(org.id)) return null;
  return { id: org.id, name: typeof org.name === 'string' ? org.name.slice(0, 200) : null };
}
