import { createHash, timingSafeEqual } from 'node:crypto';
import express from 'express';
import type { Request, Response, Router } from 'express';
import type { Grant, SandboxClient, SandboxState } from './sandbox.state';
import { SCOPES, USED_CODE_GRACE_MS, randomId, setBounded, tokenKey } from './sandbox.state';
import { escapeHtml, page } from './sandbox.html';
import type { RouteGuard } from './sandbox.http';

/**
 * `{base}/oauth/authorize` (consent page, Approve / Deny, auto-approve switch) and `{base}/oauth/token`
 * (authorization_code and refresh_token grants, JSON or form bodies, client credentials in the body or as HTTP
 * Basic). Refresh tokens are single-use and never expire; presenting a used one revokes the whole grant
 * (RFC 9700 §4.14.2 reuse detection) and answers `400 {"error":"invalid_grant"}`.
 */
export function oauthRouter(state: SandboxState, guard: RouteGuard): Router {
  const router = express.Router();
  router.get('/authorize', guard('authorize'), (req, res) => authorize(state, req, res));
  router.post('/authorize/decision', express.urlencoded({ extended: false, limit: '16kb' }), (req, res) =>
    decide(state, req, res),
  );
  router.post(
    '/token',
    guard('token'),
    express.json({ limit: '64kb' }),
    express.urlencoded({ extended: false, limit: '64kb' }),
    (req, res) => token(state, req, res),
  );
  return router;
}

/** Longest `state` accepted on /oauth/authorize. */
export const MAX_STATE_LENGTH = 2048;

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

function redirectWith(res: Response, redirectUri: string, params: Record<string, string | undefined>): void {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  res.redirect(302, url.toString());
}

function authorize(state: SandboxState, req: Request, res: Response): void {
  const q = req.query;
  const client = state.clients.get(str(q.client_id) ?? '');
  const redirectUri = str(q.redirect_uri);
  // Without a known client and its exact registered redirect URI there is nowhere safe to send an error.
  if (!client) {
    res
      .status(400)
      .type('html')
      .send(
        page('Unknown application', '<p>The <code>client_id</code> is not a registered developer app.</p>'),
      );
    return;
  }
  if (!redirectUri || !client.redirectUris.includes(redirectUri)) {
    res
      .status(400)
      .type('html')
      .send(
        page(
          'Redirect URI mismatch',
          '<p>The <code>redirect_uri</code> does not exactly match the one registered for this app.</p>',
        ),
      );
    return;
  }
  const stateParam = str(q.state);
  // Kept with each pending consent (which anyone can create): bounded, and never echoed back when too long.
  if (stateParam && stateParam.length > MAX_STATE_LENGTH) {
    redirectWith(res, redirectUri, {
      error: 'invalid_request',
      error_description: `state is longer than ${MAX_STATE_LENGTH} characters`,
    });
    return;
  }
  if (q.response_type !== 'code') {
    redirectWith(res, redirectUri, {
      error: 'unsupported_response_type',
      error_description: 'response_type must be code',
      state: stateParam,
    });
    return;
  }
  const scopes = (str(q.scope) ?? 'default').split(' ').filter(Boolean);
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (scopes.length === 0 || unknown.length > 0) {
    redirectWith(res, redirectUri, {
      error: 'invalid_scope',
      error_description: `unknown scope: ${unknown.join(' ')}`,
      state: stateParam,
    });
    return;
  }
  const challenge = str(q.code_challenge);
  const method = str(q.code_challenge_method);
  if (
    (challenge && method !== 'S256') ||
    (!challenge && method) ||
    (challenge && !/^[A-Za-z0-9_-]{43}$/.test(challenge))
  ) {
    redirectWith(res, redirectUri, {
      error: 'invalid_request',
      error_description: 'PKCE requires code_challenge_method=S256 and a valid code_challenge',
      state: stateParam,
    });
    return;
  }
  const request = {
    clientId: client.clientId,
    redirectUri,
    scopes: [...new Set(scopes)],
    state: stateParam,
    codeChallenge: challenge,
    expiresAt: state.now() + 10 * 60_000,
  };
  if (state.settings.autoApprove) {
    issueCode(state, res, request, state.settings.autoApproveAccountId);
    return;
  }
  const requestId = randomId('consent', 18);
  setBounded(state.pendingConsents, requestId, request, state.now(), 0, state.settings.unauthenticatedMapCap);
  res.type('html').send(consentPage(state, client, request.scopes, requestId));
}

function decide(state: SandboxState, req: Request, res: Response): void {
  const body = (req.body ?? {}) as Record<string, unknown>;
  const request = state.pendingConsents.get(str(body.request_id) ?? '');
  if (!request || request.expiresAt < state.now()) {
    res
      .status(400)
      .type('html')
      .send(page('This request has expired', '<p>Start again from the application.</p>'));
    return;
  }
  state.pendingConsents.delete(str(body.request_id) as string);
  if (body.decision !== 'approve') {
    redirectWith(res, request.redirectUri, {
      error: 'access_denied',
      error_description: 'The user denied the request',
      state: request.state,
    });
    return;
  }
  const accountId = str(body.account_id) ?? state.settings.autoApproveAccountId;
  if (!state.accounts.has(accountId)) {
    res.status(400).type('html').send(page('Unknown account', '<p>Choose one of the listed accounts.</p>'));
    return;
  }
  issueCode(state, res, request, accountId);
}

function issueCode(
  state: SandboxState,
  res: Response,
  request: {
    clientId: string;
    redirectUri: string;
    scopes: string[];
    state?: string;
    codeChallenge?: string;
  },
  accountId: string,
): void {
  const code = randomId('sbx_code', 18);
  // Under auto-approval anyone can mint codes: bounded, and swept an hour after expiry (replays of a code that
  // expired within the hour still revoke what it obtained).
  setBounded(
    state.codes,
    tokenKey(code),
    {
      clientId: request.clientId,
      redirectUri: request.redirectUri,
      accountId,
      scopes: request.scopes,
      expiresAt: state.now() + state.settings.codeTtlSeconds * 1000,
      used: false,
      codeChallenge: request.codeChallenge,
    },
    state.now(),
    USED_CODE_GRACE_MS,
    state.settings.unauthenticatedMapCap,
  );
  redirectWith(res, request.redirectUri, { code, state: request.state });
}

function consentPage(
  state: SandboxState,
  client: SandboxClient,
  scopes: string[],
  requestId: string,
): string {
  const accounts = [...state.accounts.values()];
  const options = accounts
    .map(
      (a) =>
        `<option value="${escapeHtml(a.id)}"${a.id === state.settings.autoApproveAccountId ? ' selected' : ''}>${escapeHtml(a.name)}</option>`,
    )
    .join('');
  const scopeItems = scopes
    .map(
      (s) =>
        `<li><strong>${escapeHtml(s)}</strong>: ${s === 'default' ? 'send rewards, read fields, funding sources, orders and rewards' : 'manage members, organizations and webhooks'}</li>`,
    )
    .join('');
  return page(
    `Authorize ${client.name}`,
    `<p><strong>${escapeHtml(client.name)}</strong> wants to access your rewards account.</p>
     <form method="post" action="authorize/decision">
       <input type="hidden" name="request_id" value="${escapeHtml(requestId)}">
       <label>Account <select name="account_id" id="account">${options}</select></label>
       <p>Requested permissions:</p><ul id="scopes">${scopeItems}</ul>
       <button type="submit" name="decision" value="approve" id="approve">Approve</button>
       <button type="submit" name="decision" value="deny" id="deny" class="secondary">Deny</button>
     </form>`,
  );
}

type TokenError = { status: number; body: { error: string; error_description?: string } };

function tokenError(status: number, error: string, description?: string): TokenError {
  return { status, body: { error, ...(description ? { error_description: description } : {}) } };
}

function authenticateClient(
  state: SandboxState,
  req: Request,
  body: Record<string, unknown>,
): SandboxClient | TokenError {
  let id = str(body.client_id);
  let secret = str(body.client_secret);
  const basic = /^Basic\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  if (basic) {
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
    const sep = decoded.indexOf(':');
    if (sep < 0) return tokenError(401, 'invalid_client', 'client authentication failed');
    // RFC 6749 §2.3.1: id and secret are form-urlencoded inside Basic; a malformed escape is a failed authentication.
    const basicId = safeDecode(decoded.slice(0, sep));
    const basicSecret = safeDecode(decoded.slice(sep + 1));
    if (basicId === undefined || basicSecret === undefined)
      return tokenError(401, 'invalid_client', 'client authentication failed');
    if ((id && id !== basicId) || (secret && secret !== basicSecret)) {
      return tokenError(400, 'invalid_request', 'client credentials sent twice and they differ');
    }
    id = basicId;
    secret = basicSecret;
  }
  const client = state.clients.get(id ?? '');
  if (!client || !secret || !safeEqual(secret, client.clientSecret)) {
    return tokenError(401, 'invalid_client', 'client authentication failed');
  }
  return client;
}

function safeDecode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

function token(state: SandboxState, req: Request, res: Response): void {
  res.setHeader('Cache-Control', 'no-store');
  const body = (req.body && typeof req.body === 'object' ? req.body : {}) as Record<string, unknown>;
  const client = authenticateClient(state, req, body);
  if ('status' in client) {
    if (client.status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="sandbox"');
    res.status(client.status).json(client.body);
    return;
  }
  const result =
    body.grant_type === 'authorization_code'
      ? exchangeCode(state, client, body)
      : body.grant_type === 'refresh_token'
        ? refresh(state, client, body)
        : tokenError(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  if ('status' in result) {
    res.status(result.status).json(result.body);
    return;
  }
  res.status(200).json(result);
}

function exchangeCode(state: SandboxState, client: SandboxClient, body: Record<string, unknown>) {
  const code = state.codes.get(tokenKey(str(body.code) ?? ''));
  if (!code) return tokenError(400, 'invalid_grant', 'unknown authorization code');
  if (code.used) {
    // A replayed code: revoke what it was exchanged for (RFC 6749 §4.1.2).
    const grant = code.grantId ? state.grants.get(code.grantId) : undefined;
    if (grant) state.revokeGrant(grant, 'authorization code replayed');
    return tokenError(400, 'invalid_grant', 'authorization code already used');
  }
  if (code.clientId !== client.clientId)
    return tokenError(400, 'invalid_grant', 'code was issued to another client');
  if (code.redirectUri !== body.redirect_uri)
    return tokenError(400, 'invalid_grant', 'redirect_uri does not match the authorization request');
  if (code.expiresAt < state.now()) return tokenError(400, 'invalid_grant', 'authorization code expired');
  const verifier = str(body.code_verifier);
  if (code.codeChallenge) {
    if (!verifier || createHash('sha256').update(verifier).digest('base64url') !== code.codeChallenge) {
      return tokenError(400, 'invalid_grant', 'PKCE verification failed');
    }
  } else if (verifier) {
    return tokenError(400, 'invalid_grant', 'code_verifier sent for a request without code_challenge');
  }
  code.used = true;
  const grant: Grant = {
    id: randomId('grant'),
    accountId: code.accountId,
    clientId: client.clientId,
    scopes: code.scopes,
    revoked: false,
    refreshCount: 0,
    currentRefreshToken: '',
    accessTokens: new Set(),
    usedRefreshTokens: [],
  };
  state.addGrant(grant);
  code.grantId = grant.id;
  return state.issueTokens(grant);
}

function refresh(state: SandboxState, client: SandboxClient, body: Record<string, unknown>) {
  const presented = str(body.refresh_token) ?? '';
  const presentedKey = tokenKey(presented);
  const record = state.refreshTokens.get(presentedKey);
  if (!record) return tokenError(400, 'invalid_grant', 'unknown refresh token');
  const grant = state.grants.get(record.grantId);
  if (!grant || grant.clientId !== client.clientId)
    return tokenError(400, 'invalid_grant', 'refresh token was issued to another client');
  if (grant.revoked) return tokenError(400, 'invalid_grant', 'grant revoked');
  if (record.used) {
    state.revokeGrant(grant, 'refresh token reused');
    return tokenError(400, 'invalid_grant', 'refresh token already used; the grant is revoked');
  }
  grant.refreshCount += 1;
  if (!state.settings.rotateRefreshTokens) {
    const { refresh_token: _kept, ...withoutRefresh } = state.issueTokens(grant, presented);
    return withoutRefresh;
  }
  state.consumeRefreshToken(grant, presentedKey);
  return state.issueTokens(grant);
}
