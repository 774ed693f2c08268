import { Injectable, Logger } from '@nestjs/common';
import { createHmac } from 'node:crypto';
import type { RewardsEnvironment } from '../config/app-config';
import { Database } from '../database/database';
import { VaultDecryptionError } from '../token-vault/vault-cipher';
import { Vault, WEBHOOK_KEY } from '../token-vault/vault.service';

/** A decrypted webhook key. An ES private field: no serialiser, logger or error ever shows it. */
export class WebhookKey {
  readonly #secret: string;

  constructor(
    readonly connectionId: string,
    /** The service's id of the account's webhook (one per organization: connections of one account share it). */
    readonly webhookId: string,
    secret: string,
  ) {
    this.#secret = secret;
  }

  hmac(data: string | Buffer): Buffer {
    return createHmac('sha256', this.#secret).update(data).digest();
  }
}

/** A registration due for another attempt, with its connection's status. */
export interface DueRegistration {
  id: string;
  connection_id: string;
  environment: RewardsEnvironment;
  attempts: number;
  /** null when the connection row is gone. */
  connection_status: string | null;
}

interface KeyRow {
  id: string;
  connection_id: string;
  webhook_id: string;
  private_key_enc: string;
}

/**
 * Every statement that writes `webhook_keys`: the registration per connection, and the webhook's private key sealed
 * by the vault (AAD = the connection id), opened only into a `WebhookKey`.
 */
@Injectable()
export class WebhookKeyStore {
  private readonly logger = new Logger(WebhookKeyStore.name);

  constructor(
    private readonly vault: Vault,
    private readonly db: Database,
  ) {}

  /** The connection's registration (created `pending`), due again at `retryAt` should this process die. */
  async begin(
    connectionId: string,
    environment: RewardsEnvironment,
    retryAt: Date,
  ): Promise<{ id: string; status: string }> {
    const { rows } = await this.db.main.query<{ id: string; status: string }>(
      `INSERT INTO webhook_keys (connection_id, environment, status, next_attempt_at) VALUES ($1, $2, 'pending', $3)
       ON CONFLICT (connection_id) DO UPDATE
         SET next_attempt_at = CASE WHEN webhook_keys.status = 'registered' THEN NULL ELSE excluded.next_attempt_at END,
             updated_at = now()
       RETURNING id, status`,
      [connectionId, environment, retryAt],
    );
    return rows[0];
  }

  /** The service accepted the registration: its webhook id and private key (encrypted here). */
  async markRegistered(
    id: string,
    connectionId: string,
    webhookId: string,
    privateKey: string,
  ): Promise<void> {
    await this.db.main.query(
      `UPDATE webhook_keys SET status = 'registered', webhook_id = $3, private_key_enc = $4, attempts = attempts + 1,
              next_attempt_at = NULL, last_error = NULL, registered_at = now(), updated_at = now()
        WHERE id = $1 AND connection_id = $2`,
      [id, connectionId, webhookId, this.vault.seal(WEBHOOK_KEY, connectionId, privateKey)],
    );
  }

  /** An attempt failed: `error` says why (a code, never a key); tried again at `retryAt`, or never when null. */
  async markFailed(id: string, error: string, retryAt: Date | null): Promise<void> {
    await this.db.main.query(
      `UPDATE webhook_keys SET status = 'failed', attempts = attempts + 1, last_error = $2, next_attempt_at = $3,
              updated_at = now()
        WHERE id = $1 AND status <> 'registered'`,
      [id, error.slice(0, 500), retryAt],
    );
  }

  /** Claims due registrations (SKIP LOCKED), pushed out by `leaseMs` so a crashed attempt comes back. */
  async claimDue(limit: number, leaseMs: number): Promise<DueRegistration[]> {
    const { rows } = await this.db.main.query<DueRegistration>(
      `UPDATE webhook_keys k SET next_attempt_at = now() + make_interval(secs => $2::float8 / 1000), updated_at = now()
         FROM (SELECT id FROM webhook_keys WHERE next_attempt_at <= now() AND status <> 'registered'
                ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED) due
        WHERE k.id = due.id
        RETURNING k.id, k.connection_id, k.environment, k.attempts,
                  (SELECT c.status FROM connections c WHERE c.id = k.connection_id) AS connection_status`,
      [limit, leaseMs],
    );
    return rows;
  }

  /**
   * A pending registration, due now, for up to `limit` live connections that have none and were connected more than
   * `graceMs` ago (fresh ones are the connect flow's). Returns how many.
   */
  async adoptUnregistered(limit: number, graceMs: number): Promise<number> {
    const { rowCount } = await this.db.main.query(
      `INSERT INTO webhook_keys (connection_id, environment, status, next_attempt_at)
       SELECT c.id, c.environment, 'pending', now() FROM connections c
        WHERE c.status IN ('active', 'error')
          AND c.connected_at < now() - make_interval(secs => $2::float8 / 1000)
          AND NOT EXISTS (SELECT 1 FROM webhook_keys k WHERE k.connection_id = c.id)
        LIMIT $1
       ON CONFLICT (connection_id) DO NOTHING`,
      [limit, graceMs],
    );
    return rowCount ?? 0;
  }

  /** `unregistered`: the registration holds no usable key (not yet, or undecryptable); null: no registration. */
  async forRegistration(
    id: string,
    environment: RewardsEnvironment,
  ): Promise<WebhookKey | 'unregistered' | null> {
    const { rows } = await this.db.main.query<KeyRow & { status: string }>(
      `SELECT id, connection_id, environment, status, webhook_id, private_key_enc FROM webhook_keys
        WHERE id = $1 AND environment = $2`,
      [id, environment],
    );
    const row = rows[0];
    if (!row) return null;
    if (row.status !== 'registered') return 'unregistered';
    return this.toKey(row) ?? 'unregistered';
  }

  /** The newest `limit` webhooks' keys, one per webhook: for an event whose URL names no usable registration. */
  async environmentKeys(environment: RewardsEnvironment, limit: number): Promise<WebhookKey[]> {
    const { rows } = await this.db.main.query<KeyRow>(
      `SELECT * FROM (
         SELECT DISTINCT ON (k.webhook_id) k.id, k.connection_id, k.environment, k.webhook_id, k.private_key_enc,
                k.registered_at
           FROM webhook_keys k JOIN connections c ON c.id = k.connection_id
          WHERE k.environment = $1 AND k.status = 'registered' AND c.status <> 'disconnected'
          ORDER BY k.webhook_id, k.registered_at DESC) w
        ORDER BY registered_at DESC LIMIT $2`,
      [environment, limit],
    );
    return rows.map((r) => this.toKey(r)).filter((k): k is WebhookKey => k !== null);
  }

  /** Every connection registered with webhook `webhookId` (the same upstream account), disconnected ones included. */
  async connectionsOfWebhook(environment: RewardsEnvironment, webhookId: string): Promise<string[]> {
    const { rows } = await this.db.main.query<{ connection_id: string }>(
      `SELECT connection_id FROM webhook_keys WHERE environment = $1 AND webhook_id = $2 AND status = 'registered'`,
      [environment, webhookId],
    );
    return rows.map((r) => r.connection_id);
  }

  private toKey(row: KeyRow): WebhookKey | null {
    try {
      const secret = this.vault.open(WEBHOOK_KEY, row.connection_id, row.private_key_enc);
      return new WebhookKey(row.connection_id, row.webhook_id, secret);
    } catch (error) {
      if (!(error instanceof VaultDecryptionError)) throw error;
      this.logger.warn(
        { registrationId: row.id, connectionId: row.connection_id, err: error.message },
        'a webhook key cannot be decrypted with VAULT_KEYS (rotated without vault:rotate?)',
      );
      return null;
    }
  }
}
