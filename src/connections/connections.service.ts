import { HttpStatus, Injectable, Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { Clock } from '../common/clock';
import { sha256Hex } from '../common/digest';
import { TtlCache } from '../common/ttl-cache';
import { ConnectionsError } from './connections.errors';
import { InjectConfig } from '../config/config.module';
import { REWARDS_ENVIRONMENTS, type RewardsConfig, type RewardsEnvironment } from '../config/app-config';
import { normaliseTokenResponse } from '../rewards-api/rewards-api.client';
import { AccessTokenProvider, live } from '../token-vault/access-token.provider';
import { ConnectionNotFoundError } from '../token-vault/token-vault.errors';
import { type ConnectionRow, ConnectionStateStore } from './connection-state.store';
import { GrantStore } from '../token-vault/grant.store';
import { NotificationsService } from '../database/notifications.service';
import { AuditLog } from '../audit/audit-log.service';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import { type ConnectSession, ConnectSessionStore } from './connect-session.store';
import { ConnectionActivationHooks } from './connection-activation';
import { TenantsService } from '../tenants/tenants.service';
import type {
  ConnectionResponse,
  ConnectSessionResponse,
  CreateConnectSessionDto,
} from './dto/connection.dto';
import type { OAuthResult } from './rewards-oauth.strategies';
import { AccountCheck, type AccountRefusal, connectLinkActor, organizationOf } from './account-check.service';

export const CONNECT_SESSION_TTL_MS = 15 * 60_000;
const LIVE_CACHE_TTL_MS = 5_000;

export type ConnectOutcome =
  { outcome: 'connected'; connectionId: string } | { outcome: 'session_used' } | AccountRefusal;

@Injectable()
export class ConnectionsService {
  private readonly logger = new Logger(ConnectionsService.name);
  private readonly liveCache: TtlCache<{ id: string; environment: RewardsEnvironment }>;

  constructor(
    @InjectConfig('rewards') private readonly environments: RewardsConfig,
    @InjectConfig('defaultEnvironment') private readonly defaultEnvironment: RewardsEnvironment,
    @InjectConfig('publicBaseUrl') private readonly publicBaseUrl: string,
    private readonly db: Database,
    private readonly tenants: TenantsService,
    private readonly tokens: AccessTokenProvider,
    private readonly state: ConnectionStateStore,
    private readonly grants: GrantStore,
    private readonly sessions: ConnectSessionStore,
    private readonly notifications: NotificationsService,
    private readonly activation: ConnectionActivationHooks,
    private readonly audit: AuditLog,
    private readonly accounts: AccountCheck,
    private readonly clock: Clock,
  ) {
    this.liveCache = new TtlCache(clock, 10_000);
    // The token cache follows the same evictions itself (AccessTokenProvider).
    notifications.evictFrom(
      this.liveCache,
      'connection',
      ({ tenant, environment }) => `${tenant}/${environment}`,
    );
  }

  resolveEnvironment(requested?: string | null): RewardsEnvironment {
    const environment = (requested ?? this.defaultEnvironment) as RewardsEnvironment;
    if (!this.environments[environment]) {
      throw new ConnectionsError(
        HttpStatus.UNPROCESSABLE_ENTITY,
        'environment_not_configured',
        `The ${environment} environment is not configured on this gateway.`,
        [{ field: 'environment', reason: `configured: ${Object.keys(this.environments).join(', ')}` }],
      );
    }
    return environment;
  }

  async createSession(tenantId: string, dto: CreateConnectSessionDto): Promise<ConnectSessionResponse> {
    const tenant = await this.tenants.require(tenantId);
    const environment = this.resolveEnvironment(dto.environment);
    if (dto.return_url !== undefined && !tenant.returnUrls.includes(dto.return_url))
      throw new ConnectionsError(
        HttpStatus.UNPROCESSABLE_ENTITY,
        'return_url_not_allowed',
        'return_url is not on the tenant’s allow-list (return_urls).',
        [{ field: 'return_url', reason: `allowed: ${tenant.returnUrls.join(', ') || 'none configured'}` }],
      );
    const token = randomBytes(32).toString('base64url');
    const scopes = [...new Set(dto.scopes ?? ['default'])];
    const row = await this.db.transaction(async (tx) => {
      const created = await this.sessions.create(tx, {
        tenantId,
        environment,
        tokenHash: sha256Hex(token),
        scopes,
        returnUrl: dto.return_url ?? null,
        ttlMs: CONNECT_SESSION_TTL_MS,
      });
      await this.audit.record(
        'connect_session.created',
        {
          tenantId,
          target: { type: 'connect_session', id: created.id },
          details: { environment, scopes, return_url: dto.return_url ?? null },
        },
        tx,
      );
      return created;
    });
    return {
      id: row.id,
      connect_url: `${this.publicBaseUrl}/connect/${token}`,
      expires_at: row.expires_at.toISOString(),
      environment,
      scopes,
    };
  }

  /** The session behind a connect link, or why it cannot be used. */
  async sessionByToken(token: string): Promise<ConnectSession | 'unknown' | 'expired' | 'used'> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return 'unknown';
    const session = await this.sessions.find(this.db.main, 'token_hash', sha256Hex(token));
    if (!session) return 'unknown';
    if (session.consumed_at) return 'used';
    if (session.expires_at.getTime() < this.clock.now()) return 'expired';
    return session;
  }

  /**
   * Stores a new grant and makes the connection active, in one transaction: the previous live connection ended (grant
   * deleted), the session consumed (once). A re-consent must authorize the live connection's organization
   * (`AccountCheck`): a refused grant is stored nowhere and the live connection is left as it is. The activation hooks
   * run before this returns, so before the browser is redirected.
   */
  async completeConnection(session: ConnectSession, result: OAuthResult): Promise<ConnectOutcome> {
    const tokens = normaliseTokenResponse(
      { ...result.params, access_token: result.accessToken, refresh_token: result.refreshToken },
      this.clock.now(),
    );
    const { refreshToken } = tokens;
    if (!refreshToken) throw new Error('the token response carried no refresh_token');
    const granted = await this.accounts.grantOrganization(session, tokens.accessToken);
    const scopes = tokens.scope ? tokens.scope.split(' ') : session.scopes;
    const outcome = await this.db.transaction(async (tx): Promise<ConnectOutcome> => {
      const refused = await this.accounts.check(tx, session, granted);
      if (refused) return refused;
      if (!(await this.sessions.consume(tx, session.id))) return { outcome: 'session_used' };
      const previous = await this.endLive(tx, session.tenant_id, session.environment, 'replaced');
      const connectionId = await this.state.insertActive(
        tx,
        session.tenant_id,
        session.environment,
        scopes,
        tokens.expiresAt,
        granted,
        previous,
      );
      await this.grants.insert(tx, connectionId, { ...tokens, refreshToken });
      await this.sessions.markConnected(tx, session.id, connectionId);
      const lineage = { replaced: previous.map((p) => p.id), organization_id: granted?.id ?? null };
      await this.state.event(tx, connectionId, 'connected', { scopes: tokens.scope, ...lineage });
      // A live connection replaced makes this a re-consent; the actor is the admin behind the connect link.
      await this.audit.record(
        previous.length ? 'connection.reconsented' : 'connection.connected',
        {
          tenantId: session.tenant_id,
          target: { type: 'connection', id: connectionId },
          details: { environment: session.environment, scopes, ...lineage },
          actor: connectLinkActor(session),
        },
        tx,
      );
      await this.notifications.publish(
        { kind: 'connection', id: connectionId, tenant: session.tenant_id, environment: session.environment },
        tx,
      );
      return { outcome: 'connected', connectionId };
    });
    if (outcome.outcome === 'account_mismatch' || outcome.outcome === 'account_check_failed')
      this.accounts.logRefusal(session, outcome);
    if (outcome.outcome !== 'connected') return outcome;
    const id = outcome.connectionId;
    this.liveCache.delete(`${session.tenant_id}/${session.environment}`);
    this.logger.log(
      { tenantId: session.tenant_id, connectionId: id, environment: session.environment },
      'connection active',
    );
    await this.activation.run({ id, tenantId: session.tenant_id, environment: session.environment });
    return outcome;
  }

  /**
   * The live connection of a tenant in an environment, cached for 5 s (the vault re-checks the status whenever it
   * reads the grant). Throws connection_not_found / not_active.
   */
  async liveConnection(
    tenantId: string,
    environment?: string | null,
  ): Promise<{ id: string; environment: RewardsEnvironment }> {
    const env = this.resolveEnvironment(environment);
    return this.liveCache.getOrLoad(`${tenantId}/${env}`, LIVE_CACHE_TTL_MS, async () => {
      // With none live, the last one ended: a disconnected connection answers 409 (as needs_reauth); none ever, 404.
      const row =
        (await this.state.findLive(this.db.main, tenantId, env)) ?? (await this.latest(tenantId, env));
      return { id: live(row, env, tenantId).id, environment: env };
    });
  }

  async getConnection(tenantId: string, environment?: string): Promise<ConnectionResponse> {
    await this.tenants.require(tenantId);
    const env = this.resolveEnvironment(environment);
    const row = await this.latest(tenantId, env);
    if (!row) throw new ConnectionNotFoundError(env, tenantId);
    return toConnectionResponse(row);
  }

  /** The tenant's live connection in the environment, else the last one ended. */
  private async latest(tenantId: string, env: string): Promise<ConnectionRow | undefined> {
    const { rows } = await this.db.main.query<ConnectionRow>(
      `SELECT * FROM connections WHERE tenant_id = $1 AND environment = $2 ORDER BY (status <> 'disconnected') DESC, connected_at DESC LIMIT 1`,
      [tenantId, env],
    );
    return rows[0];
  }

  async disconnect(tenantId: string, environment?: string): Promise<ConnectionResponse> {
    await this.tenants.require(tenantId);
    const env = this.resolveEnvironment(environment);
    const row = await this.db.transaction(async (tx) => {
      const [ended] = await this.endLive(tx, tenantId, env, 'disconnected');
      if (!ended) return null;
      await this.audit.record(
        'connection.disconnected',
        { tenantId, target: { type: 'connection', id: ended.id }, details: { environment: env } },
        tx,
      );
      return ended;
    });
    if (!row) throw new ConnectionNotFoundError(env);
    this.forget(row.id, tenantId, env);
    return toConnectionResponse(row);
  }

  /** Offboarding, in the transaction that marks the tenant deleted: every live connection ended. */
  async offboard(tx: Sql, tenantId: string): Promise<void> {
    for (const environment of REWARDS_ENVIRONMENTS)
      for (const ended of await this.endLive(tx, tenantId, environment, 'disconnected'))
        this.forget(ended.id, tenantId, environment);
  }

  /**
   * Ends the live connection(s) of a tenant in an environment in `tx`: grant deleted, event recorded, and every
   * instance told to forget it once `tx` commits (its queued dispatches end cancelled).
   */
  private async endLive(tx: Sql, tenantId: string, environment: string, event: 'replaced' | 'disconnected') {
    const ended = await this.state.disconnectLive(tx, tenantId, environment);
    for (const old of ended) {
      await this.grants.delete(tx, old.id);
      await this.state.event(tx, old.id, event);
      await this.notifications.publish(
        { kind: 'connection', id: old.id, tenant: old.tenant_id, environment: old.environment },
        tx,
      );
    }
    return ended;
  }

  private forget(connectionId: string, tenantId: string, environment: string): void {
    this.tokens.evict(connectionId);
    this.liveCache.delete(`${tenantId}/${environment}`);
  }
}

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

/** The connection row as the API shows it (never tokens); ops adds health on top. */
export function toConnectionResponse(row: Record<string, unknown>): ConnectionResponse {
  return {
    id: row.id as string,
    tenant_id: row.tenant_id as string,
    environment: row.environment as RewardsEnvironment,
    status: row.status as ConnectionResponse['status'],
    scopes: row.scopes as string[],
    connected_at: iso(row.connected_at) as string,
    disconnected_at: iso(row.disconnected_at),
    last_refreshed_at: iso(row.last_refreshed_at),
    access_expires_at: iso(row.access_expires_at),
    last_used_at: iso(row.last_used_at),
    last_error: row.last_error_code
      ? {
          code: row.last_error_code as string,
          message: row.last_error_message as string,
          at: iso(row.last_error_at) as string,
        }
      : null,
    consecutive_failures: row.consecutive_failures as number,
    refresh_count: row.refresh_count as number,
    organization: organizationOf(row),
  };
}
