import { Injectable, Logger, Optional } from '@nestjs/common';
import { Clock } from '../common/clock';
import { SingleFlight } from '../common/single-flight';
import { TtlCache } from '../common/ttl-cache';
import { MetricsService } from '../metrics/metrics.service';
import type { Pool, PoolClient } from 'pg';
import { NotificationsService } from '../database/notifications.service';
import { Database } from '../database/database';
import { InjectConfig } from '../config/config.module';
import type { RewardsConfig, RewardsEnvironment, TokensConfig } from '../config/app-config';
import { RewardsApiClient, TOKEN_CALL_TIMEOUT_MS, type TokenSet } from '../rewards-api/rewards-api.client';
import { RewardsApiError } from '../rewards-api/rewards-api.errors';
import type { ConnectionToken, TokenSource } from '../rewards-api/connection-client';
import { CallRecorder, recorded } from '../rewards-api/call-recorder';
import { AppCredentialsStore } from './app-credentials.store';
import { type Sql, inTransaction } from '../database/sql';
import { type GrantRow, GrantStore } from './grant.store';
import {
  AppCredentialsInvalidError,
  ConnectionNotActiveError,
  ConnectionNotFoundError,
  RefreshBackoffError,
  RefreshFailedError,
  RefreshLockTimeoutError,
} from './token-vault.errors';

/** Refresh this long before expiry, but never more than a tenth of the token's lifetime (a 2 s token is used). */
export const REFRESH_SKEW_MS = 30_000;
const REFRESH_SKEW_FRACTION = 0.1;
/** Cooldown after transient refresh failures: 2 s, 4 s, 8 s … capped at 5 min. */
export const BACKOFF_BASE_MS = 2_000;
export const BACKOFF_MAX_MS = 300_000;
/** Consecutive transient failures after which the connection shows `error`. */
const ERROR_THRESHOLD = 3;
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

export interface AccessToken extends ConnectionToken {
  /** Handed out until then (ms since the epoch): a little before it expires (see usableUntil). */
  refreshAt: number;
  environment: RewardsEnvironment;
}

/**
 * What the refresh protocol writes on its connection, on the pool or transaction it is given, so that a refresh's
 * outcome commits with the rotated grant under the same lock. Declared here so that the vault does not depend on the
 * connections module (which implements it).
 */
export abstract class ConnectionStatus {
  abstract markUsed(q: Sql, connectionId: string): Promise<void>;
  abstract markNeedsReauth(
    q: Sql,
    connectionId: string,
    code: string,
    message: string,
    detail: Detail,
    fromLiveOnly?: boolean,
  ): Promise<boolean>;
  abstract refreshOutcomeUnknownSinceLastSuccess(q: Sql, connectionId: string): Promise<boolean>;
  abstract markRefreshed(q: Sql, connectionId: string, accessExpiresAt: Date, detail: Detail): Promise<void>;
  abstract markRefreshFailed(
    q: Sql,
    connectionId: string,
    message: string,
    policy: { errorThreshold: number; backoffBaseMs: number; backoffMaxMs: number },
    detail: Detail,
  ): Promise<number>;
}
type Detail = Record<string, unknown>;

/** The row of a connection that may use tokens; throws otherwise (the 404 names `environment` and `tenantId`). */
export function live<T extends { status: string }>(
  row: T | null | undefined,
  environment?: string,
  tenantId?: string,
): T {
  if (!row) throw new ConnectionNotFoundError(environment, tenantId);
  if (row.status !== 'active' && row.status !== 'error') throw new ConnectionNotActiveError(row.status);
  return row;
}

/** The cooldown after the `failures`-th transient refresh failure in a row (ms): what markRefreshFailed writes. */
export function refreshBackoffMs(failures: number): number {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (failures - 1));
}

export function usableUntil(issuedAt: number, expiresAt: number): number {
  const skew = Math.min(REFRESH_SKEW_MS, (expiresAt - issuedAt) * REFRESH_SKEW_FRACTION);
  return expiresAt - skew;
}

/** How far our clock and the rewards service's may disagree. */
export const EXPIRY_MARGIN_MS = 1_000;

/** Whether a token expiring at `expiresAt` was certainly still valid at `at`, our clock against the service's. */
export function validAt(expiresAt: number, at: number, marginMs = EXPIRY_MARGIN_MS): boolean {
  return at + marginMs < expiresAt;
}

/**
 * What an API call's 401 says, for the token `used`:
 * - `expired`: it may have expired on the way (not still valid at `answeredAt`): refresh, retry;
 * - `refused`: a valid token refused, perhaps revoked alone: force one refresh, retry;
 * - `grant_refused`: a valid token newer than `refusedBefore` (the generation already refused in the same request,
 *   or null) refused again: the service refuses the grant, only a new consent helps.
 */
export function judgeUnauthorized(
  used: { generation: number; expiresAt: number },
  answeredAt: number,
  refusedBefore: number | null,
): 'expired' | 'refused' | 'grant_refused' {
  if (!validAt(used.expiresAt, answeredAt)) return 'expired';
  return refusedBefore !== null && used.generation > refusedBefore ? 'grant_refused' : 'refused';
}

/**
 * The only way any module gets a bearer token for a connection: memory cache → in-process single-flight per
 * connection → the grant row → when it needs refreshing, `refreshUnderLock`.
 */
@Injectable()
export class AccessTokenProvider implements TokenSource {
  private readonly logger = new Logger(AccessTokenProvider.name);
  private readonly cache = new Map<string, AccessToken>();
  private readonly knownEnvironments = new Map<string, RewardsEnvironment>();
  private readonly inFlight = new SingleFlight<AccessToken>();
  private readonly lastUseWritten: TtlCache<true>;
  /** The lock pool: refreshes have their own share of the connection budget and cannot starve other queries. */
  private readonly pool: Pool;
  private readonly appCredentials = new AppCredentialsStore();
  /** Per environment: until when refreshes fail fast after the token endpoint refused our app credentials. */
  private readonly appCredentialsRefusedUntil = new Map<RewardsEnvironment, number>();

  constructor(
    @InjectConfig('rewards') private readonly environments: RewardsConfig,
    db: Database,
    private readonly api: RewardsApiClient,
    private readonly connections: ConnectionStatus,
    private readonly grants: GrantStore,
    private readonly clock: Clock,
    @Optional() private readonly metrics?: MetricsService,
    @Optional() notifications?: NotificationsService,
    @Optional() private readonly recorder?: CallRecorder,
    @Optional()
    @InjectConfig('tokens')
    private readonly tokens: TokensConfig = { refreshLockTimeoutMs: 5_000, appCredentialsRetryMs: 10_000 },
  ) {
    this.pool = db.lock;
    this.lastUseWritten = new TtlCache(clock, 10_000);
    // Another instance disconnected or replaced the connection: forget its token here too.
    notifications?.evictFrom(this.cache, 'connection', ({ id }) => id);
  }

  /** A valid access token for the connection; refreshes (once, cluster-wide) when needed. */
  async getAccessToken(connectionId: string): Promise<AccessToken> {
    this.markUsed(connectionId);
    const cached = this.cache.get(connectionId);
    if (cached && cached.refreshAt > this.clock.now()) return cached;
    return this.singleFlight(connectionId, false, (row) => this.usable(row));
  }

  /**
   * After an upstream 401 with `used`: drop the cached token; if another instance already rotated the grant, use
   * the new one; otherwise force one refresh (compare-and-set on the generation that failed).
   */
  async afterUnauthorized(connectionId: string, used: ConnectionToken): Promise<AccessToken> {
    const cached = this.cache.get(connectionId);
    if (cached && cached.generation > used.generation && cached.refreshAt > this.clock.now()) return cached;
    this.cache.delete(connectionId);
    return this.singleFlight(connectionId, true, (row) =>
      row.generation > used.generation ? this.usable(row) : null,
    );
  }

  /** The connection's environment (it never changes): remembered, else read with the grant. */
  async environmentOf(connectionId: string): Promise<RewardsEnvironment> {
    const known = this.knownEnvironments.get(connectionId);
    if (known) return known;
    const { environment } = await this.readGrant(connectionId);
    this.knownEnvironments.set(connectionId, environment);
    return environment;
  }

  /**
   * An API call with `used` was answered 401 at `answeredAt` (see judgeUnauthorized). Resolves when the request may be
   * sent again, with what to pass as `refusedBefore` next time; when the service refuses the grant, the connection
   * goes to needs_reauth (with its tenant event, in one transaction) and this throws.
   */
  async unauthorized(
    connectionId: string,
    used: ConnectionToken,
    answeredAt: number,
    refusedBefore: number | null,
  ): Promise<number | null> {
    const verdict = judgeUnauthorized(used, answeredAt, refusedBefore);
    if (verdict === 'grant_refused') {
      this.cache.delete(connectionId);
      const message =
        'The rewards service rejected a freshly refreshed access token (401); the tenant must connect again.';
      const reason = 'unauthorized';
      await inTransaction(this.pool, (tx) =>
        this.connections.markNeedsReauth(tx, connectionId, reason, message, { reason }, true),
      );
      throw new ConnectionNotActiveError('needs_reauth');
    }
    await this.afterUnauthorized(connectionId, used);
    return verdict === 'refused' ? used.generation : refusedBefore;
  }

  /** Forces a refresh through the lock (ops). */
  async forceRefresh(connectionId: string): Promise<AccessToken> {
    this.cache.delete(connectionId);
    return this.singleFlight(connectionId, true, () => null);
  }

  /** Forgets the cached token (disconnect, reconnect). */
  evict(connectionId: string): void {
    this.cache.delete(connectionId);
  }

  /** Records `last_used_at` at most once a minute per connection and process, off the caller's path. */
  private markUsed(connectionId: string): void {
    if (this.lastUseWritten.get(connectionId)) return;
    this.lastUseWritten.set(connectionId, true, LAST_USED_WRITE_INTERVAL_MS);
    this.connections
      .markUsed(this.pool, connectionId)
      .catch((error: Error) => this.logger.warn(`could not record connection use: ${error.message}`));
  }

  /** One read per connection at a time in this process: the grant's token if `reuse` takes it, else a refresh. */
  private async singleFlight(
    connectionId: string,
    force: boolean,
    reuse: (row: GrantRow) => AccessToken | null,
  ): Promise<AccessToken> {
    return this.inFlight.run(connectionId, async () => {
      const row = await this.readGrant(connectionId);
      return reuse(row) ?? this.refreshUnderLock(connectionId, row.generation, force);
    });
  }

  private async readGrant(connectionId: string): Promise<GrantRow> {
    return live(await this.grants.find(this.pool, connectionId));
  }

  /** The row's token if it is still usable, cached; otherwise null. Throws during a refresh cooldown. */
  private usable(row: GrantRow): AccessToken | null {
    const issued = row.issued_at.getTime();
    const until = usableUntil(issued, row.expires_at.getTime());
    const now = this.clock.now();
    if (until > now) {
      const token: AccessToken = {
        token: this.grants.accessToken(row),
        generation: row.generation,
        refreshAt: until,
        expiresAt: row.expires_at.getTime(),
        environment: row.environment,
      };
      this.cache.set(row.connection_id, token);
      return token;
    }
    if (row.backoff_until && row.backoff_until.getTime() > now) {
      this.metrics?.refreshBackoffs.inc();
      throw new RefreshBackoffError((row.backoff_until.getTime() - now) / 1000);
    }
    return null;
  }

  /**
   * The refresh protocol (refresh tokens are single-use, so one refresh per grant at a time, cluster-wide):
   * 1. BEGIN; lock the grant row (FOR UPDATE, bounded by lock_timeout) — holds across processes;
   * 2. re-check: if the generation moved past the one we saw and the token is usable, someone else refreshed: done;
   * 3. call the token endpoint (timeout below idle_in_transaction_session_timeout);
   * 4. 200 → store the rotated pair with generation + 1 (compare-and-set), COMMIT;
   *    invalid_grant → needs_reauth + event, COMMIT; transient → ROLLBACK (keep the old token), count the failure;
   *    invalid_client → ROLLBACK, the environment's app credentials are refused (no connection changes).
   */
  private async refreshUnderLock(
    connectionId: string,
    generationSeen: number,
    force: boolean,
  ): Promise<AccessToken> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch {
      throw new RefreshLockTimeoutError();
    }
    // What to record once the transaction is rolled back; returns the error to throw.
    let afterRollback: (() => Promise<Error>) | undefined;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = '${this.tokens.refreshLockTimeoutMs}ms'`);
      let row: GrantRow;
      const waited = this.metrics?.lockWait.startTimer();
      try {
        row = live(await this.grants.find(client, connectionId, true));
      } catch (error) {
        if ((error as { code?: string }).code === '55P03') {
          this.metrics?.refreshes.inc({ outcome: 'lock_timeout' }); // lock_not_available
          throw new RefreshLockTimeoutError();
        }
        throw error;
      } finally {
        waited?.();
      }
      if (row.generation > generationSeen || !force) {
        const token = this.usable(row);
        if (token) {
          await client.query('COMMIT');
          return token;
        }
      }
      const env = this.environments[row.environment];
      if (!env)
        throw new ConnectionNotActiveError(
          `configured for ${row.environment}, which this gateway no longer has`,
        );
      const refusedUntil = this.appCredentialsRefusedUntil.get(row.environment) ?? 0;
      const now = this.clock.now();
      if (refusedUntil > now)
        throw new AppCredentialsInvalidError(row.environment, (refusedUntil - now) / 1000);
      const refreshToken = this.grants.refreshToken(row);
      let tokens: TokenSet;
      try {
        tokens = await recorded(
          this.recorder,
          { connectionId, operation: 'token_refresh', attempt: 1, throttled: 0, pacingWaitMs: 0 },
          () => this.api.refreshToken(env, refreshToken, TOKEN_CALL_TIMEOUT_MS),
        );
      } catch (error) {
        if (error instanceof RewardsApiError && error.kind === 'invalid_client') {
          // Our own client id / secret were refused: the tenant's grant is not at fault and stays as it is.
          this.metrics?.refreshes.inc({ outcome: 'invalid_client' });
          const environment = row.environment;
          afterRollback = () => this.recordAppCredentialsRefused(environment, error);
          throw error;
        }
        if (
          error instanceof RewardsApiError &&
          (error.kind === 'invalid_grant' || error.kind === 'rejected')
        ) {
          this.metrics?.refreshes.inc({ outcome: 'invalid_grant' });
          await this.markNeedsReauth(client, connectionId, error);
          await client.query('COMMIT');
          this.cache.delete(connectionId);
          throw new ConnectionNotActiveError('needs_reauth');
        }
        const transient =
          error instanceof RewardsApiError ? error : new RewardsApiError('transient', String(error));
        this.metrics?.refreshes.inc({ outcome: 'transient' });
        afterRollback = () => this.recordTransientFailure(connectionId, transient);
        throw transient;
      }
      const token = await this.storeRotated(client, row, tokens);
      if (this.appCredentialsRefusedUntil.delete(row.environment))
        this.logger.log({ environment: row.environment }, 'app credentials accepted again');
      await this.appCredentials.clear(client, row.environment);
      await client.query('COMMIT');
      this.metrics?.refreshes.inc({ outcome: 'success' });
      this.cache.set(connectionId, token);
      return token;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw afterRollback ? await afterRollback() : error;
    } finally {
      client.release();
    }
  }

  private async storeRotated(client: PoolClient, row: GrantRow, tokens: TokenSet): Promise<AccessToken> {
    // Under the row lock this always matches; the compare-and-set guards against any writer that skipped the lock.
    if (!(await this.grants.rotate(client, row, tokens)))
      throw new Error('grant generation moved during a locked refresh');
    await this.connections.markRefreshed(client, row.connection_id, tokens.expiresAt, {
      generation: row.generation + 1,
      expires_at: tokens.expiresAt.toISOString(),
      recovered: row.status === 'error',
    });
    return {
      token: tokens.accessToken,
      generation: row.generation + 1,
      refreshAt: usableUntil(tokens.issuedAt.getTime(), tokens.expiresAt.getTime()),
      expiresAt: tokens.expiresAt.getTime(),
      environment: row.environment,
    };
  }

  private async markNeedsReauth(
    client: PoolClient,
    connectionId: string,
    error: RewardsApiError,
  ): Promise<void> {
    const afterUnknown = await this.connections.refreshOutcomeUnknownSinceLastSuccess(client, connectionId);
    const message = afterUnknown
      ? 'The rewards service rejected the refresh token. An earlier refresh timed out after it was sent and most likely consumed it; the tenant must connect again.'
      : 'The rewards service rejected the refresh token (used or revoked); the tenant must connect again.';
    await this.connections.markNeedsReauth(client, connectionId, error.kind, message, {
      reason: error.kind,
      status: error.status,
      after_unknown_outcome: afterUnknown,
    });
    this.logger.warn(
      { connectionId, reason: error.kind, afterUnknownOutcome: afterUnknown },
      'connection needs re-authorization',
    );
  }

  /** Environment-wide: recorded once for the alerting, fast failures for a while, no connection touched. */
  private async recordAppCredentialsRefused(
    environment: RewardsEnvironment,
    error: RewardsApiError,
  ): Promise<AppCredentialsInvalidError> {
    this.appCredentialsRefusedUntil.set(environment, this.clock.now() + this.tokens.appCredentialsRetryMs);
    this.logger.error(
      { environment, status: error.status },
      'the rewards service rejected this gateway’s app credentials (invalid_client)',
    );
    await this.appCredentials
      .markInvalid(
        this.pool,
        environment,
        `The token endpoint answered ${error.status ?? '?'} invalid_client for the ${environment} app credentials.`,
      )
      .catch((e: Error) => this.logger.warn(`could not record the app credentials state: ${e.message}`));
    return new AppCredentialsInvalidError(environment, this.tokens.appCredentialsRetryMs / 1000);
  }

  /** Keeps the old token, counts the failure and starts a cooldown; returns the error to throw. */
  private async recordTransientFailure(
    connectionId: string,
    error: RewardsApiError,
  ): Promise<RefreshFailedError> {
    const failures = await this.connections.markRefreshFailed(
      this.pool,
      connectionId,
      error.message,
      { errorThreshold: ERROR_THRESHOLD, backoffBaseMs: BACKOFF_BASE_MS, backoffMaxMs: BACKOFF_MAX_MS },
      { reason: error.message, status: error.status, outcome_unknown: error.outcomeUnknown },
    );
    this.logger.warn(
      { connectionId, status: error.status, outcomeUnknown: error.outcomeUnknown, failures },
      'token refresh failed',
    );
    return new RefreshFailedError(
      error.outcomeUnknown ? 'no answer from the rewards service' : error.message,
      refreshBackoffMs(failures) / 1000,
    );
  }
}
