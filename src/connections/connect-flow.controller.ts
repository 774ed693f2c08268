import { Controller, Get, Logger, Param, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { randomBytes } from 'node:crypto';
import passport from 'passport';
import { InjectConfig } from '../config/config.module';
import { Public } from '../tenants/auth/auth.decorators';
import { escapeHtml, sendHtml } from '../common/html';
import { connectLandingPage, connectPage } from './connect-pages';
import { type ConnectSession, ConnectSessionStore } from './connect-session.store';
import { Database } from '../database/database';
import { ConnectionsService } from './connections.service';
import type { ConnectRequest } from './oauth-state.store';
import { isBrowserUrl } from '../common/url';
import { BROWSER_COOKIE, PgStateStore, STATE_TTL_MS } from './oauth-state.store';
import type { OAuthResult } from './rewards-oauth.strategies';
import type { UpstreamOrganization } from '../rewards-api/rewards-api.types';
import { strategyName } from './rewards-oauth.strategies';

const TOKEN_EXCHANGE_TIMEOUT_MS = 15_000;
/** The browser-binding cookie goes back only to the OAuth callback. */
const CALLBACK_PATH = '/oauth/callback';

const MESSAGES: Record<string, string> = {
  access_denied:
    'You did not approve the connection, so nothing was connected. You can try again at any time.',
  state_invalid: 'This sign-in response is not one we started. Start again from the platform.',
  state_missing: 'The sign-in response is incomplete. Start again from the platform.',
  state_expired: 'The sign-in took too long and expired. Start again from the platform.',
  state_replayed: 'This sign-in response was already used. Start again from the platform.',
  browser_mismatch:
    'The sign-in was finished in another browser than the one that started it. Start again in one browser.',
  missing_code: 'The rewards service sent no authorization code. Start again from the platform.',
  token_exchange_failed:
    'The rewards service did not accept the sign-in. Start again; if it keeps failing, contact support.',
  token_exchange_timeout: 'The rewards service did not answer in time. Start again in a moment.',
  provider_error: 'The rewards service reported an error. Start again; if it keeps failing, contact support.',
  session_used: 'This connect link was already used. Ask the platform for a new one.',
  link_unknown: 'This connect link is not valid. Ask the platform for a new one.',
  link_expired: 'This connect link has expired. Ask the platform for a new one.',
  link_used: 'This connect link was already used. Ask the platform for a new one.',
  account_mismatch:
    'You approved a different rewards account than the one this platform is connected to, so nothing was changed: ' +
    'the platform keeps its current account. Start again and approve with the same account; to switch to another ' +
    'account, the platform must disconnect the current one first.',
  account_check_failed:
    'The rewards service did not tell us which account you approved, so nothing was changed. Start again in a moment.',
};

/** The result page's status and title where they differ from a failed sign-in's (400, "did not complete"). */
const STATUSES: Record<string, number> = {
  access_denied: 200,
  account_mismatch: 409,
  account_check_failed: 503,
  link_unknown: 404,
  link_expired: 410,
  link_used: 410,
};
const LINK_UNAVAILABLE = 'Connect link unavailable';
const TITLES: Record<string, string> = {
  access_denied: 'Connection not approved',
  account_mismatch: 'A different rewards account',
  link_unknown: LINK_UNAVAILABLE,
  link_expired: LINK_UNAVAILABLE,
  link_used: LINK_UNAVAILABLE,
};

/** The browser side of connecting: the hosted page, the redirect to the rewards service, and the callback. */
@ApiExcludeController()
@Controller()
export class ConnectFlowController {
  private readonly logger = new Logger(ConnectFlowController.name);
  constructor(
    private readonly connections: ConnectionsService,
    @InjectConfig('publicBaseUrl') private readonly publicBaseUrl: string,
    private readonly states: PgStateStore,
    private readonly sessions: ConnectSessionStore,
    private readonly db: Database,
  ) {}

  @Get('connect/:token')
  @Public()
  async page(@Param('token') token: string, @Res() res: FastifyReply): Promise<void> {
    const session = await this.connections.sessionByToken(token);
    if (typeof session === 'string') return this.result(res, null, `link_${session}`);
    sendHtml(
      res,
      connectLandingPage(
        session.tenant_name,
        session.environment,
        session.scopes,
        `${token}/authorize`,
        session.return_url && isBrowserUrl(session.return_url) ? session.return_url : null,
      ),
    );
  }

  @Get('connect/:token/authorize')
  @Public()
  async authorize(
    @Param('token') token: string,
    @Req() req: ConnectRequest,
    @Res() res: FastifyReply,
  ): Promise<void> {
    const session = await this.connections.sessionByToken(token);
    if (typeof session === 'string') return this.result(res, null, `link_${session}`);
    const binding = randomBytes(32).toString('base64url');
    const secure = this.publicBaseUrl.startsWith('https:') ? '; Secure' : '';
    res.header(
      'Set-Cookie',
      `${BROWSER_COOKIE}=${binding}; Max-Age=${STATE_TTL_MS / 1000}; Path=${CALLBACK_PATH}; HttpOnly${secure}; SameSite=Lax`,
    );
    req.connectSessionId = session.id;
    req.browserBinding = binding;
    // passport answers with its redirect (`redirect(url)`: status, Location, end), here through the reply.
    await new Promise<void>((resolve) => {
      let status = 302;
      const redirect = {
        set statusCode(code: number) {
          status = code;
        },
        setHeader: (name: string, value: string) => void res.header(name, value),
        end: () => {
          void res.code(status).send();
          resolve();
        },
      };
      passport.authenticate(strategyName(session.environment), { session: false, scope: session.scopes })(
        req,
        redirect,
        (error: unknown) => {
          this.logger.error({ err: String(error) }, 'could not start the authorization');
          this.result(res, null, 'provider_error');
          resolve();
        },
      );
    });
  }

  @Get('oauth/callback')
  @Public()
  async callback(@Req() req: ConnectRequest, @Res() res: FastifyReply): Promise<void> {
    res.header(
      'Set-Cookie',
      `${BROWSER_COOKIE}=; Path=${CALLBACK_PATH}; Expires=${new Date(0).toUTCString()}`,
    );
    const sessionId = await this.states.peekSession(req.query.state);
    const session = sessionId ? await this.sessions.find(this.db.main, 'id', sessionId) : null;
    if (!session) return this.result(res, null, 'state_invalid');
    if (req.query.error !== undefined || req.query.code === undefined) {
      const consumed = await this.states.consume(req, req.query.state);
      const reason =
        'failure' in consumed
          ? consumed.failure
          : req.query.error === 'access_denied'
            ? 'access_denied'
            : req.query.error
              ? 'provider_error'
              : 'missing_code';
      return this.finish(res, session, reason);
    }
    let outcome: { user: OAuthResult | false; info?: { message?: string } };
    try {
      outcome = await this.exchange(req, res, session);
    } catch (error) {
      const timedOut = error instanceof Error && error.message === 'timeout';
      this.logger.warn(
        { sessionId: session.id, reason: timedOut ? 'timeout' : (error as { name?: string })?.name },
        'token exchange failed',
      );
      return this.finish(res, session, timedOut ? 'token_exchange_timeout' : 'token_exchange_failed');
    }
    if (!outcome.user) return this.finish(res, session, outcome.info?.message ?? 'state_invalid');
    const completed = await this.connections.completeConnection(session, outcome.user);
    return this.finish(
      res,
      session,
      completed.outcome,
      completed.outcome === 'account_mismatch' ? completed.organization : null,
    );
  }

  /** Runs passport-oauth2 on the callback: state check (consumes it), code exchange with the PKCE verifier. */
  private exchange(
    req: ConnectRequest,
    res: FastifyReply,
    session: ConnectSession,
  ): Promise<{ user: OAuthResult | false; info?: { message?: string } }> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timeout')), TOKEN_EXCHANGE_TIMEOUT_MS);
      passport.authenticate(
        strategyName(session.environment),
        { session: false },
        (error: unknown, user: OAuthResult | false, info?: { message?: string }) => {
          clearTimeout(timer);
          if (error) reject(error instanceof Error ? error : new Error('token_exchange_failed'));
          else resolve({ user, info });
        },
      )(req, res.raw, (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error('token_exchange_failed'));
      });
    });
  }

  /** `organization`: on account_mismatch, the one the connection keeps (named on the gateway's own page only). */
  private async finish(
    res: FastifyReply,
    session: ConnectSession,
    outcome: string,
    organization: UpstreamOrganization | null = null,
  ): Promise<void> {
    if (outcome !== 'connected') await this.sessions.recordOutcome(this.db.main, session.id, outcome);
    // A stored return_url that no longer parses (stored before it was checked at the door) shows the page instead.
    if (session.return_url && isBrowserUrl(session.return_url)) {
      const url = new URL(session.return_url);
      url.searchParams.set('status', outcome === 'connected' ? 'connected' : 'error');
      if (outcome !== 'connected') url.searchParams.set('error', outcome);
      void res.redirect(url.toString(), 302);
      return;
    }
    this.result(res, session, outcome, organization);
  }

  private result(
    res: FastifyReply,
    session: ConnectSession | null,
    outcome: string,
    organization: UpstreamOrganization | null = null,
  ): void {
    if (outcome === 'connected' && session) {
      sendHtml(
        res,
        connectPage(
          'Rewards account connected',
          `%TITLE%<p><strong>${escapeHtml(session.tenant_name)}</strong> can now send rewards through your rewards account (${escapeHtml(session.environment)}).</p><p class="muted">You can close this window.</p>`,
          'ok',
        ),
      );
      return;
    }
    const status = STATUSES[outcome] ?? 400;
    const title = TITLES[outcome] ?? 'The connection did not complete';
    // The organization the connection keeps, so the admin knows which account to approve (the page is the admin's:
    // reached only through the tenant's connect link).
    const keeps =
      outcome === 'account_mismatch' && organization
        ? `<p id="organization">The platform is connected to <strong>${escapeHtml(organization.name ?? organization.id)}</strong>.</p>`
        : '';
    sendHtml(
      res,
      connectPage(
        title,
        `%TITLE%<p id="reason" data-reason="${escapeHtml(outcome)}">${escapeHtml(MESSAGES[outcome] ?? MESSAGES.provider_error)}</p>${keeps}`,
        'error',
      ),
      status,
    );
  }
}
