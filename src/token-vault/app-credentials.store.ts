import type { Pool, PoolClient } from 'pg';
import type { RewardsEnvironment } from '../config/app-config';

/**
 * `rewards_environments`: trouble that belongs to an environment, not to a tenant — today the gateway's own app
 * credentials refused by the token endpoint (`invalid_client`). Shared through Postgres so every instance, the
 * dashboard and the alerting see the same state; a successful refresh clears it.
 */
export class AppCredentialsStore {
  constructor(private readonly pool: Pool) {}

  async markInvalid(environment: RewardsEnvironment, message: string): Promise<void> {
    await this.pool.query(
      `INSERT INTO rewards_environments (name, app_credentials_invalid_at, app_credentials_message, updated_at)
       VALUES ($1, now(), $2, now())
       ON CONFLICT (name) DO UPDATE SET app_credentials_invalid_at = coalesce(rewards_environments.app_credentials_invalid_at, now()),
                                        app_credentials_message = EXCLUDED.app_credentials_message, updated_at = now()`,
      [environment, message],
    );
  }

  /** Inside the refresh transaction that just succeeded: the credentials work again. */
  async clear(client: PoolClient, environment: RewardsEnvironment): Promise<void> {
    await client.query(
      `UPDATE rewards_environments SET app_credentials_invalid_at = NULL, app_credentials_message = NULL, updated_at = now()
        WHERE name = $1 AND app_credentials_invalid_at IS NOT NULL`,
      [environment],
    );
  }
}
