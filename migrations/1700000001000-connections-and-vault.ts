import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

export class ConnectionsAndVault1700000001000 implements MigrationInterface {
  name = 'ConnectionsAndVault1700000001000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE connections (
        id                    uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id             varchar(63)  NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        environment           varchar(16)  NOT NULL CHECK (environment IN ('sandbox', 'production')),
        status                varchar(16)  NOT NULL CHECK (status IN ('active', 'needs_reauth', 'error', 'disconnected')),
        scopes                text[]       NOT NULL DEFAULT '{}',
        connected_at          timestamptz  NOT NULL DEFAULT now(),
        disconnected_at       timestamptz,
        last_refreshed_at     timestamptz,
        access_expires_at     timestamptz,
        last_used_at          timestamptz,
        last_error_code       varchar(64),
        last_error_message    text,
        last_error_at         timestamptz,
        consecutive_failures  integer      NOT NULL DEFAULT 0,
        refresh_count         integer      NOT NULL DEFAULT 0,
        backoff_until         timestamptz,
        updated_at            timestamptz  NOT NULL DEFAULT now()
      )`);
    // At most one live connection per tenant and environment.
    await queryRunner.query(
      `CREATE UNIQUE INDEX connections_one_live_idx ON connections (tenant_id, environment) WHERE status <> 'disconnected'`,
    );
    await queryRunner.query(`CREATE INDEX connections_status_idx ON connections (status)`);
    // The vault row: ciphertexts only (AES-256-GCM, see token-vault/vault-cipher.ts).
    await queryRunner.query(`
      CREATE TABLE grants (
        connection_id      uuid         PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
        access_token_enc   text         NOT NULL,
        refresh_token_enc  text         NOT NULL,
        token_type         varchar(32)  NOT NULL DEFAULT 'Bearer',
        scope              text         NOT NULL DEFAULT '',
        issued_at          timestamptz  NOT NULL,
        expires_at         timestamptz  NOT NULL,
        generation         integer      NOT NULL DEFAULT 1,
        updated_at         timestamptz  NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE connect_sessions (
        id            uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id     varchar(63)  NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        environment   varchar(16)  NOT NULL,
        token_hash    char(64)     NOT NULL UNIQUE,
        scopes        text[]       NOT NULL,
        return_url    text,
        expires_at    timestamptz  NOT NULL,
        created_at    timestamptz  NOT NULL DEFAULT now(),
        consumed_at   timestamptz,
        outcome       varchar(64),
        connection_id uuid         REFERENCES connections(id) ON DELETE SET NULL
      )`);
    await queryRunner.query(`
      CREATE TABLE oauth_states (
        state_hash        char(64)     PRIMARY KEY,
        session_id        uuid         NOT NULL REFERENCES connect_sessions(id) ON DELETE CASCADE,
        browser_hash      char(64)     NOT NULL,
        code_verifier_enc text,
        expires_at        timestamptz  NOT NULL,
        consumed_at       timestamptz,
        created_at        timestamptz  NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE connection_events (
        id             bigserial    PRIMARY KEY,
        connection_id  uuid         NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
        type           varchar(64)  NOT NULL,
        detail         jsonb        NOT NULL DEFAULT '{}',
        at             timestamptz  NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(
      `CREATE INDEX connection_events_connection_idx ON connection_events (connection_id, at DESC)`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE connection_events`);
    await queryRunner.query(`DROP TABLE oauth_states`);
    await queryRunner.query(`DROP TABLE connect_sessions`);
    await queryRunner.query(`DROP TABLE grants`);
    await queryRunner.query(`DROP TABLE connections`);
  }
}
