import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * The rewards service's delivery webhooks.
 * - `webhook_keys` (written by token-vault/webhook-key.store.ts): one registration per connection. `id` is the opaque
 *   registration id the gateway puts in the webhook URL (`?account=<id>`); `webhook_id` is the service's id of the
 *   account's webhook (one per organization, so connections of one account share it) and `private_key_enc` its
 *   signing key, encrypted with the vault (AAD bound to the connection). `status`: pending (being registered),
 *   registered, failed (retried at `next_attempt_at`; null: given up).
 * - `webhook_events` (written by delivery-webhooks/webhook-event.store.ts): the `uuid` of every event handled, recorded
 *   after its state change was applied (or found irrelevant), so a retried or replayed event is answered without
 *   being applied again. Purged after 30 days.
 */
export class DeliveryWebhooks1700000012000 implements MigrationInterface {
  name = 'DeliveryWebhooks1700000012000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE webhook_keys (
        id               uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
        connection_id    uuid         NOT NULL UNIQUE REFERENCES connections(id) ON DELETE CASCADE,
        environment      varchar(16)  NOT NULL CHECK (environment IN ('sandbox', 'production')),
        status           varchar(16)  NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'registered', 'failed')),
        webhook_id       text,
        private_key_enc  text,
        attempts         integer      NOT NULL DEFAULT 0,
        next_attempt_at  timestamptz,
        last_error       text,
        registered_at    timestamptz,
        created_at       timestamptz  NOT NULL DEFAULT now(),
        updated_at       timestamptz  NOT NULL DEFAULT now(),
        CHECK (status <> 'registered' OR (webhook_id IS NOT NULL AND private_key_enc IS NOT NULL))
      )`);
    await queryRunner.query(
      `CREATE INDEX webhook_keys_webhook_idx ON webhook_keys (environment, webhook_id) WHERE status = 'registered'`,
    );
    await queryRunner.query(
      `CREATE INDEX webhook_keys_retry_idx ON webhook_keys (next_attempt_at) WHERE next_attempt_at IS NOT NULL`,
    );
    await queryRunner.query(`
      CREATE TABLE webhook_events (
        uuid           varchar(100) PRIMARY KEY,
        connection_id  uuid,
        event          varchar(100) NOT NULL,
        received_at    timestamptz  NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`CREATE INDEX webhook_events_received_idx ON webhook_events (received_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE webhook_events`);
    await queryRunner.query(`DROP TABLE webhook_keys`);
  }
}
