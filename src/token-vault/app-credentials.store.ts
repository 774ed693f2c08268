import { Injectable } from '@nestjs/common';
import type { RewardsEnvironment } from '../config/app-config';
import type { Sql } from '../database/sql';

export interface AppCredentialsTransition {
  environment: string;
  kind: 'app_credentials.invalid' | 'app_credentials.recovered';
  message: string | null;
  since: Date | null;
}

/**
 * Every statement that writes `rewards_environments`: the gateway's own app credentials refused by the token endpoint
 * (`invalid_client`), shared so every instance, the dashboard and the alerting see it; a successful refresh clears it.
 */
@Injectable()
export class AppCredentialsStore {
  async markInvalid(q: Sql, environment: RewardsEnvironment, message: string): Promise<void> {
    await q.query(
      `INSERT INTO rewards_environments (name, app_credentials_invalid_at, app_credentials_message, updated_at)
       VALUES ($1, now(), $2, now())
       ON CONFLICT (name) DO UPDATE SET app_credentials_invalid_at = coalesce(rewards_environments.app_credentials_invalid_at, now()),
                                        app_credentials_message = EXCLUDED.app_credentials_message, updated_at = now()`,
      [environment, message],
    );
  }

  /** Inside the refresh transaction that just succeeded: the credentials work again. */
  async clear(q: Sql, environment: RewardsEnvironment): Promise<void> {
    await q.query(
      `UPDATE rewards_environments SET app_credentials_invalid_at = NULL, app_credentials_message = NULL, updated_at = now()
        WHERE name = $1 AND app_credentials_invalid_at IS NOT NULL`,
      [environment],
    );
  }

  /** The state changes since each environment's last alert, each once across instances (run it with the alerts). */
  async claimAlertTransitions(q: Sql): Promise<AppCredentialsTransition[]> {
    const { rows } = await q.query<AppCredentialsTransition>(
      `UPDATE rewards_environments SET alerted_at = CASE WHEN app_credentials_invalid_at IS NULL THEN NULL ELSE now() END
        WHERE (app_credentials_invalid_at IS NOT NULL AND alerted_at IS NULL) OR (app_credentials_invalid_at IS NULL AND alerted_at IS NOT NULL)
        RETURNING name AS environment, app_credentials_message AS message, app_credentials_invalid_at AS since,
                  CASE WHEN app_credentials_invalid_at IS NULL THEN 'app_credentials.recovered' ELSE 'app_credentials.invalid' END AS kind`,
    );
    return rows;
  }
}
