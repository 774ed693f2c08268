import { Injectable } from '@nestjs/common';
import type { RewardsEnvironment } from '../config/app-config';
import type { Sql } from '../database/sql';
import type { TokenSet } from '../rewards-api/rewards-api.client';
import { GRANT_ACCESS, GRANT_REFRESH, Vault } from './vault.service';

/** A grant with its connection's state; the tokens still sealed (`accessToken` and `refreshToken` open them). */
export interface GrantRow {
  connection_id: string;
  environment: RewardsEnvironment;
  status: string;
  backoff_until: Date | null;
  access_token_enc: string;
  refresh_token_enc: string;
  generation: number;
  issued_at: Date;
  expires_at: Date;
}

const SELECT = `
  SELECT g.connection_id, c.environment, c.status, c.backoff_until, g.access_token_enc, g.refresh_token_enc,
         g.generation, g.issued_at, g.expires_at
    FROM grants g JOIN connections c ON c.id = g.connection_id`;

/** Every statement on `grants`, on the pool or transaction given; seals the tokens going in, opens them coming out. */
@Injectable()
export class GrantStore {
  constructor(private readonly vault: Vault) {}

  /** `forUpdate`: the grant row locked (the refresh lock). */
  async find(q: Sql, connectionId: string, forUpdate = false): Promise<GrantRow | undefined> {
    const lock = forUpdate ? 'FOR UPDATE OF g' : '';
    const { rows } = await q.query<GrantRow>(`${SELECT} WHERE g.connection_id = $1 ${lock}`, [connectionId]);
    return rows[0];
  }

  /** The grant written last, if any (the vault canary checks the keys against it). */
  async newest(q: Sql): Promise<GrantRow | undefined> {
    const { rows } = await q.query<GrantRow>(`${SELECT} ORDER BY g.updated_at DESC LIMIT 1`);
    return rows[0];
  }

  accessToken(row: GrantRow): string {
    return this.vault.open(GRANT_ACCESS, row.connection_id, row.access_token_enc);
  }

  refreshToken(row: GrantRow): string {
    return this.vault.open(GRANT_REFRESH, row.connection_id, row.refresh_token_enc);
  }

  async insert(q: Sql, connectionId: string, tokens: TokenSet & { refreshToken: string }): Promise<void> {
    await q.query(
      `INSERT INTO grants (connection_id, access_token_enc, refresh_token_enc, token_type, scope, issued_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [connectionId, ...this.sealed(connectionId, tokens, null)],
    );
  }

  async delete(q: Sql, connectionId: string): Promise<void> {
    await q.query(`DELETE FROM grants WHERE connection_id = $1`, [connectionId]);
  }

  /** The rotated pair (or the old refresh token kept), generation + 1, compare-and-set on `row`'s. True if applied. */
  async rotate(q: Sql, row: GrantRow, tokens: TokenSet): Promise<boolean> {
    const { rowCount } = await q.query(
      `UPDATE grants SET access_token_enc = $2, refresh_token_enc = $3, token_type = $4, scope = $5, issued_at = $6,
              expires_at = $7, generation = generation + 1, updated_at = now()
        WHERE connection_id = $1 AND generation = $8`,
      [row.connection_id, ...this.sealed(row.connection_id, tokens, row.refresh_token_enc), row.generation],
    );
    return rowCount === 1;
  }

  /** The grant's columns in statement order, from $2. */
  private sealed(id: string, t: TokenSet, keptRefreshEnc: string | null): unknown[] {
    const accessEnc = this.vault.seal(GRANT_ACCESS, id, t.accessToken);
    const refreshEnc = t.refreshToken ? this.vault.seal(GRANT_REFRESH, id, t.refreshToken) : keptRefreshEnc;
    return [accessEnc, refreshEnc, t.tokenType, t.scope, t.issuedAt, t.expiresAt];
  }
}
