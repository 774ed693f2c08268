import { Injectable, Logger } from '@nestjs/common';
import { AuditLog } from '../audit/audit-log.service';
import { AppError } from '../common/app-error';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import { AlertsService } from '../ops/alerts.service';
import type { UpstreamOrganization } from '../rewards-api/rewards-api.types';
import { RewardsApi } from '../token-vault/rewards-api.service';
import type { ConnectSession } from './connect-session.store';
import { ConnectionProbe } from './connection-probe.service';
import { ConnectionStateStore } from './connection-state.store';

type CheckedSession = Pick<ConnectSession, 'id' | 'tenant_id' | 'environment'>;

export type AccountRefusal =
  | {
      outcome: 'account_mismatch';
      connectionId: string;
      /** The one the connection keeps. */
      organization: UpstreamOrganization | null;
      refused: UpstreamOrganization;
    }
  | { outcome: 'account_check_failed'; connectionId: string };

/** The admin in the browser, known by the connect link (the link's creator is on its connect_session.created). */
export const connectLinkActor = (session: { id: string }) =>
  ({ type: 'connect_link', id: session.id, name: null, via: 'connect' }) as const;

export function organizationOf(row: Record<string, unknown>): UpstreamOrganization | null {
  return typeof row.organization_id === 'string'
    ? { id: row.organization_id, name: (row.organization_name as string | null) ?? null }
    : null;
}

/**
 * What a connect callback does with a new grant: a live connection (active, error or needs_reauth) is replaced only
 * by a grant of its own organization (its orders and history are that account's); with none, any is accepted.
 * `unverifiable` (refused for now, the admin can retry): the grant's organization is unknown, or the live one's is
 * while its grant still works; a needs_reauth connection of unknown organization can never tell, so it is accepted.
 */
export function accountVerdict(
  live: { status: string; organization_id?: unknown } | null,
  granted: UpstreamOrganization | null,
): 'accept' | 'mismatch' | 'unverifiable' {
  if (!live) return 'accept';
  if (!granted) return 'unverifiable';
  if (live.organization_id == null) return live.status === 'needs_reauth' ? 'accept' : 'unverifiable';
  return live.organization_id === granted.id ? 'accept' : 'mismatch';
}

/**
 * The connect callback's account check: `grantOrganization` before its transaction (no lock held across upstream
 * calls), then `check` inside it, which refuses a grant of another organization and records the refusal (event,
 * audit, ops alert) in that transaction. A refused grant is never stored; with no revocation endpoint, it lapses.
 */
@Injectable()
export class AccountCheck {
  private readonly logger = new Logger(AccountCheck.name);

  constructor(
    private readonly db: Database,
    private readonly rewardsApi: RewardsApi,
    private readonly state: ConnectionStateStore,
    private readonly probes: ConnectionProbe,
    private readonly audit: AuditLog,
    private readonly alerts: AlertsService,
  ) {}

  /** The new grant's organization, or null when the service does not say; paced as the live connection. */
  async grantOrganization(
    session: CheckedSession,
    accessToken: string,
  ): Promise<UpstreamOrganization | null> {
    const live = await this.state.findLive(this.db.main, session.tenant_id, session.environment);
    // A connection made before organizations were recorded learns its own now (a needs_reauth grant cannot).
    if (live && live.organization_id === null && live.status !== 'needs_reauth')
      await this.probes.probe(live.id);
    try {
      return await this.rewardsApi.forGrant(session.environment, accessToken, live?.id ?? null).probe();
    } catch (error) {
      this.logger.warn(
        {
          sessionId: session.id,
          reason: error instanceof AppError ? error.code : (error as { name?: string })?.name,
        },
        'could not ask the organization of a new grant',
      );
      return null;
    }
  }

  /** Null when the grant may be stored; else the refusal, recorded. Run it first in the callback's transaction. */
  async check(
    tx: Sql,
    session: CheckedSession,
    granted: UpstreamOrganization | null,
  ): Promise<AccountRefusal | null> {
    // Locked until the transaction ends: the connection compared is the one replaced, or kept.
    const current = await this.state.lockLive(tx, session.tenant_id, session.environment);
    const verdict = accountVerdict(current, granted);
    if (verdict === 'accept' || !current) return null;
    if (verdict === 'unverifiable' || !granted)
      return { outcome: 'account_check_failed', connectionId: current.id };
    const organization = organizationOf(current);
    const detail = {
      environment: session.environment,
      reason: 'account_mismatch',
      organization_id: organization?.id ?? null,
      refused_organization_id: granted.id,
      connect_session_id: session.id,
    };
    await this.state.event(tx, current.id, 'reconsent_refused', detail);
    await this.audit.record(
      'connection.reconsent_refused',
      {
        tenantId: session.tenant_id,
        target: { type: 'connection', id: current.id },
        details: detail,
        actor: connectLinkActor(session),
      },
      tx,
    );
    await this.alerts.raise(tx, {
      connectionId: current.id,
      kind: 'connection.account_mismatch',
      payload: {
        connection_id: current.id,
        tenant_id: session.tenant_id,
        environment: session.environment,
        status: current.status,
        last_error: 'account_mismatch',
        message:
          `A re-consent authorized organization ${granted.id} (${granted.name ?? 'no name'}), not the connection's ` +
          `${organization?.id ?? '?'} (${organization?.name ?? 'no name'}): refused, the connection is unchanged.`,
        organization,
        refused_organization: granted,
        connect_session_id: session.id,
      },
    });
    return { outcome: 'account_mismatch', connectionId: current.id, organization, refused: granted };
  }

  logRefusal(session: CheckedSession, refusal: AccountRefusal): void {
    const context = {
      tenantId: session.tenant_id,
      environment: session.environment,
      connectionId: refusal.connectionId,
    };
    if (refusal.outcome === 'account_check_failed')
      return this.logger.warn(
        context,
        'a re-consent was refused for now: the organization it authorized is not known',
      );
    this.logger.warn(
      {
        ...context,
        alert: 'connection.account_mismatch',
        organizationId: refusal.organization?.id ?? null,
        refusedOrganizationId: refusal.refused.id,
      },
      'connection alert: connection.account_mismatch (a re-consent authorized another organization: refused)',
    );
  }
}
