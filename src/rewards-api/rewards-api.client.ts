import { Injectable, type OnModuleDestroy, Optional } from '@nestjs/common';
import { Agent, type Dispatcher } from 'undici';
import { MetricsService } from '../metrics/metrics.service';
import type { RewardsEnvironmentConfig } from '../config/app-config';
import { RewardsApiError, type RewardsApiErrorKind, upstreamMessage } from './rewards-api.errors';
import { SpanStatusCode } from '@opentelemetry/api';
import { clientSpan } from '../common/tracing';
import { Clock } from '../common/clock';

/** A token response, normalised. `refreshToken` is absent when the service did not rotate it. */
export interface TokenSet {
  accessToken: string;
  refreshToken?: string;
  tokenType: string;
  scope: string;
  issuedAt: Date;
  expiresAt: Date;
}

/** A 2xx answer of an `/api/v2` call, its JSON body parsed. */
export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
}

interface RawResponse {
  status: number;
  text: string;
  /** The wait its `Retry-After` header asks for, in seconds. */
  retryAfter: number | null;
}

export const TOKEN_CALL_TIMEOUT_MS = 10_000;
export const API_CALL_TIMEOUT_MS = 15_000;

/** A raw token response as a TokenSet; expiry is `created_at + expires_in` (spec §5), `receivedAt` in epoch ms. */
export function normaliseTokenResponse(raw: Record<string, unknown>, receivedAt: number): TokenSet {
  if (typeof raw.access_token !== 'string' || !raw.access_token)
    throw new RewardsApiError('transient', 'token response without access_token', 200);
  const expiresIn = typeof raw.expires_in === 'number' && raw.expires_in > 0 ? raw.expires_in : 3600;
  const createdAtMs = typeof raw.created_at === 'number' ? raw.created_at * 1000 : NaN;
  // A created_at in the future (clock skew) or missing: trust our own clock instead.
  const issuedMs =
    Number.isFinite(createdAtMs) && createdAtMs <= receivedAt + 1000 ? createdAtMs : receivedAt;
  return {
    accessToken: raw.access_token,
    refreshToken: typeof raw.refresh_token === 'string' && raw.refresh_token ? raw.refresh_token : undefined,
    tokenType: typeof raw.token_type === 'string' ? raw.token_type : 'Bearer',
    scope: typeof raw.scope === 'string' ? raw.scope : '',
    issuedAt: new Date(issuedMs),
    expiresAt: new Date(issuedMs + expiresIn * 1000),
  };
}

/** The HTTP client of the rewards service (`/oauth/token`, `/api/v2/...`): timeouts, classified failures. */
@Injectable()
export class RewardsApiClient implements OnModuleDestroy {
  /** Idle sockets dropped after 4 s, below the usual 5 s server keep-alive. */
  private readonly agent: Dispatcher = new Agent({
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 30_000,
    connections: 64,
    maxResponseSize: 16 * 1024 * 1024,
  });

  constructor(
    private readonly clock: Clock,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  async onModuleDestroy(): Promise<void> {
    await this.agent.close();
  }

  async refreshToken(
    env: RewardsEnvironmentConfig,
    refreshToken: string,
    timeoutMs = TOKEN_CALL_TIMEOUT_MS,
  ): Promise<TokenSet> {
    const body = new URLSearchParams({
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: env.clientId,
      client_secret: env.clientSecret,
    });
    const res = await this.send(
      'token',
      env.baseUrl,
      '/oauth/token',
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
        body: body.toString(),
      },
      timeoutMs,
    );
    const json = parseJson(res) as Record<string, unknown>;
    if (res.status === 200) return normaliseTokenResponse(json, this.clock.now());
    const error = typeof json.error === 'string' ? json.error : `http_${res.status}`;
    const fail = (kind: RewardsApiErrorKind, message: string, retryAfterSeconds: number | null = null) =>
      new RewardsApiError(kind, message, res.status, { error }, retryAfterSeconds);
    if (res.status === 400 && error === 'invalid_grant')
      throw fail('invalid_grant', 'the rewards service rejected the refresh token (used or revoked)');
    if (error === 'invalid_client' || res.status === 401)
      throw fail('invalid_client', 'the rewards service rejected the client credentials');
    if (res.status === 429 || res.status >= 500)
      throw fail('transient', `token endpoint answered ${res.status}`, res.retryAfter);
    throw fail('rejected', `token endpoint answered ${res.status} ${error}`);
  }

  /** An `/api/v2` call with a bearer token. Returns 2xx answers; throws a classified RewardsApiError otherwise. */
  async call<T>(
    env: RewardsEnvironmentConfig,
    accessToken: string,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    timeoutMs = API_CALL_TIMEOUT_MS,
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${accessToken}`,
      Accept: 'application/json',
    };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await this.send(
      routeOf(method, path),
      env.baseUrl,
      `/api/v2${path}`,
      { method, headers, body: body === undefined ? undefined : JSON.stringify(body) },
      timeoutMs,
    );
    const json = parseJson(res);
    if (res.status >= 200 && res.status < 300) return { status: res.status, body: json as T };
    const message = upstreamMessage(json) ?? `rewards service answered ${res.status}`;
    if (res.status === 401) throw new RewardsApiError('unauthorized', message, 401, json);
    if (res.status === 429 || res.status >= 500)
      throw new RewardsApiError('transient', message, res.status, json, res.retryAfter);
    throw new RewardsApiError('rejected', message, res.status, json);
  }

  /**
   * One HTTP exchange, body read in full; `timeoutMs` bounds the headers and each pause of the body. Redirects are
   * not followed (a token must not travel to another host); a response over 16 MiB is a network error.
   */
  private send(
    route: string,
    baseUrl: string,
    path: string,
    init: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string },
    timeoutMs: number,
  ): Promise<RawResponse> {
    // A client span: method, host and route only (never the query string, the token or the body).
    const template = route === 'token' ? '/oauth/token' : route.slice(route.indexOf(' ') + 1);
    return clientSpan(
      route === 'token' ? 'POST /oauth/token' : route,
      async (span) => {
        const stop = this.metrics?.upstreamLatency.startTimer({ route });
        try {
          // The base URL's path is a prefix (the mounted sandbox's is `/sandbox`).
          const url = new URL(baseUrl);
          if (url.protocol !== 'http:' && url.protocol !== 'https:')
            throw new Error(`${url.protocol} is not an HTTP base URL`);
          const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
          span.setAttributes({ 'server.address': url.hostname, 'server.port': port });
          const res = await this.agent.request({
            origin: url.origin,
            path: url.pathname.replace(/\/+$/, '') + path,
            method: init.method,
            headers: init.headers,
            body: init.body,
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
          });
          const text = await res.body.text();
          stop?.({ status: String(res.statusCode) });
          span.setAttribute('http.response.status_code', res.statusCode);
          if (res.statusCode >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
          const retryAfter = res.headers['retry-after'];
          return {
            status: res.statusCode,
            text,
            retryAfter: retryAfterSeconds(
              Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
              this.clock.now(),
            ),
          };
        } catch (error) {
          stop?.({ status: 'error' });
          const code = (error as { code?: string }).code;
          const timedOut = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
          span.setAttribute('rewards_api.failure', timedOut ? 'timeout' : 'network_error');
          // Either way the request may have reached the service: its outcome is unknown.
          throw new RewardsApiError(
            'transient',
            timedOut ? `no answer within ${timeoutMs} ms` : 'network error reaching the rewards service',
            null,
            null,
            null,
            true,
          );
        }
      },
      { 'http.request.method': init.method, 'url.template': template },
    );
  }
}

/** A bounded route label: `POST /orders`, `GET /rewards` (no ids, no query). */
function routeOf(method: string, path: string): string {
  const bare = path.split('?')[0].replace(/\/[^/]*\d[^/]*$/, '/:id');
  return `${method} ${bare}`;
}

function parseJson(res: RawResponse): unknown {
  if (!res.text) return {};
  try {
    return JSON.parse(res.text);
  } catch {
    return { raw: res.text.slice(0, 500) };
  }
}

/** A `Retry-After` header's wait in seconds — delay-seconds, or an HTTP date counted from `now` (epoch ms) — or null. */
export function retryAfterSeconds(header: string | undefined, now: number): number | null {
  if (!header) return null;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(header);
  return Number.isFinite(date) ? Math.max(0, Math.ceil((date - now) / 1000)) : null;
}
