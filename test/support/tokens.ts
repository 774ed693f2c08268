import { sqlOn } from './database';

/**
 * Waits until every access token stored in the gateway's database has expired, `marginMs` past the latest expiry:
 * as long as a sleep of the token's lifetime, but counted from the token's issue instead of from the caller's last step.
 */
export async function untilTokensExpired(databaseUrl: string, marginMs: number): Promise<void> {
  const [{ at }] = await sqlOn(databaseUrl, `SELECT max(expires_at) AS at FROM grants`);
  if (!(at instanceof Date)) throw new Error('no stored grant: no token to wait for');
  await new Promise((r) => setTimeout(r, Math.max(0, at.getTime() + marginMs - Date.now())));
}
