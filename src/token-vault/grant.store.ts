import { Injectable } from '@nestjs/common';
import type { Sql } from '../database/sql';

/** The encrypted columns of a grant (ciphertexts only: the vault encrypts before, decrypts after). */
export interface GrantValues {
  accessTokenEnc: string;
  refreshTokenEnc: string;
  tokenType: string;
  scope: string;
  issuedAt: Date;
  expiresAt: Date;
}

/** The grant's columns in statement order, from $2. */
const columns = (g: GrantValues) => [
  g.accessTokenEnc,
  g.refreshTokenEnc,
  g.tokenType,
  g.scope,
  g.issuedAt,
  g.expiresAt,
];

/** Every statement that writes `grants`. Stateless: each runs on the pool or transaction it is given. */
@Injectable()
export class GrantStore {
  async insert(q: Sql, connectionId: string, g: GrantValues): Promise<void> {
    await q.query(
      `INSERT INTO grants (connection_id, access_token_enc, refresh_token_enc, token_type, scope, issued_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [connectionId, ...columns(g)],
    );
  }

  async delete(q: Sql, connectionId: string): Promise<void> {
    await q.query(`DELETE FROM grants WHERE connection_id = $1`, [connectionId]);
  }

  /** The rotated pair, generation + 1, compare-and-set on the generation read under the lock. True when it applied. */
  async rotate(q: Sql, connectionId: string, g: GrantValues, generationSeen: number): Promise<boolean> {
    const { rowCount } = await q.query(
      `UPDATE grants SET access_token_enc = $2, refresh_token_enc = $3, token_type = $4, scope = $5, issued_at = $6,
              expires_at = $7, generation = generation + 1, updated_at = now()
        WHERE connection_id = $1 AND generation = $8`,
      [connectionId, ...columns(g), generationSeen],
    );
    return rowCount === 1;
  }
}
