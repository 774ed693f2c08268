import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../common/digest';
import type { FastifyRequest } from 'fastify';
import { Database } from '../database/database';
import { OAUTH_VERIFIER, Vault } from '../token-vault/vault.service';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

export const STATE_TTL_MS = 10 * 60_000;
export const BROWSER_COOKIE = 'rg_connect';

export type ConnectRequest = FastifyRequest<{ Querystring: Record<string, string | undefined> }> & {
  connectSessionId?: string;
  browserBinding?: string;
};

export type StateFailure =
  'state_missing' | 'state_invalid' | 'state_expired' | 'state_replayed' | 'browser_mismatch';

/**
 * passport-oauth2's state store, in Postgres (RFC 9700 §4.7): 256 random bits stored as a hash, single-use, expiring,
 * bound to the connect session and to the browser (a short-lived cookie's hash); the PKCE verifier encrypted beside it.
 */
@Injectable()
export class PgStateStore {
  constructor(
    private readonly db: Database,
    private readonly vault: Vault,
  ) {}

  /** Retention: deletes up to `limit` states (used or not) that expired before `olderThan`. */
  purgeExpired(olderThan: Date, limit: number): Promise<number> {
    const text = batchDelete.matching('oauth_states', 'state_hash', 'expires_at < $1');
    return purgeBatch(this.db.main, text, olderThan, limit);
  }

  /** passport-oauth2 calls this (5 arguments: PKCE-aware) when it builds the authorization redirect. */
  store(
    req: ConnectRequest,
    verifier: string | undefined,
    _state: unknown,
    _meta: unknown,
    cb: (err: Error | null, state?: string) => void,
  ): void {
    const state = randomBytes(32).toString('base64url');
    const stateHash = sha256Hex(state);
    if (!req.connectSessionId || !req.browserBinding)
      return cb(new Error('connect session missing on the authorization request'));
    this.db.main
      .query(
        `INSERT INTO oauth_states (state_hash, session_id, browser_hash, code_verifier_enc, expires_at)
         VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::float8 / 1000))`,
        [
          stateHash,
          req.connectSessionId,
          sha256Hex(req.browserBinding),
          verifier ? this.vault.seal(OAUTH_VERIFIER, stateHash, verifier) : null,
          STATE_TTL_MS,
        ],
      )
      .then(
        () => cb(null, state),
        (error: Error) => cb(error),
      );
  }

  /** passport-oauth2 calls this on the callback; consumes the state (single use) and returns the PKCE verifier. */
  verify(
    req: ConnectRequest,
    providedState: string,
    _meta: unknown,
    cb: (err: Error | null, ok: string | boolean, info?: unknown) => void,
  ): void {
    this.consume(req, providedState).then(
      (result) => {
        if ('failure' in result) cb(null, false, { message: result.failure });
        else cb(null, result.verifier ?? true, providedState);
      },
      (error: Error) => cb(error, false),
    );
  }

  async consume(
    req: ConnectRequest,
    providedState: unknown,
  ): Promise<{ verifier?: string } | { failure: StateFailure }> {
    if (typeof providedState !== 'string' || providedState.length < 20 || providedState.length > 200)
      return { failure: 'state_missing' };
    const stateHash = sha256Hex(providedState);
    const { rows } = await this.db.main.query<{
      browser_hash: string;
      code_verifier_enc: string | null;
      expired: boolean;
    }>(
      `UPDATE oauth_states SET consumed_at = now()
        WHERE state_hash = $1 AND consumed_at IS NULL
        RETURNING browser_hash, code_verifier_enc, expires_at < now() AS expired`,
      [stateHash],
    );
    const row = rows[0];
    if (!row)
      return { failure: (await this.peekSession(providedState)) ? 'state_replayed' : 'state_invalid' };
    if (row.expired) return { failure: 'state_expired' };
    const cookie = readCookie(req, BROWSER_COOKIE);
    if (!cookie || sha256Hex(cookie) !== row.browser_hash) return { failure: 'browser_mismatch' };
    const sealed = row.code_verifier_enc;
    return { verifier: sealed ? this.vault.open(OAUTH_VERIFIER, stateHash, sealed) : undefined };
  }

  /** The session a state belongs to, without consuming it (to pick the environment's strategy). */
  async peekSession(providedState: unknown): Promise<string | null> {
    if (typeof providedState !== 'string' || providedState.length > 200) return null;
    const { rows } = await this.db.main.query<{ session_id: string }>(
      `SELECT session_id FROM oauth_states WHERE state_hash = $1`,
      [sha256Hex(providedState)],
    );
    return rows[0]?.session_id ?? null;
  }
}

function readCookie(req: Pick<FastifyRequest, 'headers'>, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k !== name) continue;
    try {
      return decodeURIComponent(v.join('='));
    } catch {
      return undefined; // a malformed percent-encoding is no cookie of ours (the browser check then fails closed)
    }
  }
  return undefined;
}
