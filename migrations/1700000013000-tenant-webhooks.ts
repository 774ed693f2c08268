import type { MigrationInterface, QueryRunner } from '../src/database/migrator';

/**
 * Tenant webhooks: endpoints a tenant registers, and the durable outbox of the events to deliver to them.
 *
 * (Since 1700000017500-tenant-events-in-code the triggers below are gone: the code that makes a change builds its
 * events as typed values and writes them to the outbox in its own transaction, through webhook.store.ts, the outbox's
 * one writer. What follows describes this migration as it was.)
 *
 * `webhook_endpoints` (writer: src/tenant-webhooks/webhook.store.ts): url, subscribed event types (or `*`), the signing
 * secret encrypted with the vault (AAD `webhook_endpoint/<id>/secret`), and the delivery health — consecutive failures,
 * `failing_since`, `disabled_at` / `disabled_reason`. The partial index on active endpoints by tenant is what the
 * triggers below probe: with no active endpoint the probe finds nothing in an empty index and they stop there.
 *
 * `webhook_outbox` has TWO writers, on purpose:
 *  1. the trigger functions below (INSERT only): one row per active endpoint of the tenant subscribed to the event,
 *     written in the transaction of the state change itself — a change that commits has its events, one that rolls
 *     back has none, whatever happens to the process afterwards (kill -9 included). Fan-out happens here, at insert:
 *     an endpoint registered later never receives older events;
 *  2. src/tenant-webhooks/webhook.store.ts: claims (a lease: `next_attempt_at` moves past the claim, so a crashed
 *     sender's rows come back), outcomes, replays, housekeeping.
 * The triggers write nothing into the other modules' tables and those modules' code is unchanged.
 *
 * Events (payload `{type, timestamp, data}`, Standard Webhooks style; never a secret, a token or a redemption link):
 *  - `reward.sent`: `dispatch_rewards.status` becomes `sent` (directly, or when an order held for approval executes);
 *  - `reward.delivered` / `reward.delivery_failed`: `dispatch_rewards.delivery_state` becomes that state (a later
 *    change to the other final state is another event), with `delivery_reason`;
 *  - `dispatch.completed`: `reward_dispatches.status` leaves `sending` / `queued` for a settled status (`sent`,
 *    `partially_failed`, `failed`, `cancelled` or `pending_approval`), with counts per reward status. A settled
 *    dispatch never goes back to `sending`/`queued`, so this is once per dispatch; when it settles as
 *    `pending_approval`, its held rewards follow as `reward.sent` once approved;
 *  - `connection.needs_reauth`: `connections.status` becomes `needs_reauth`;
 *  - `connection.recovered`: `needs_reauth` → `active` on the same connection, or a new active connection replacing a
 *    `needs_reauth` one of the same tenant and environment in the same transaction (re-consent; `replaced_connection_id`).
 *    (A connection in `error` — transient refresh failures — is not broken, so its return to `active` is no event.)
 *
 * Cost on the hot send path: the row triggers have WHEN clauses (evaluated without entering PL/pgSQL) so only real
 * transitions call a function; the function's first statement is one probe of the partial index, written inline in
 * PL/pgSQL (whose plans are cached per session — a LANGUAGE sql helper is planned again at every call, which measured
 * three times the cost). Measured on the send path's final write (one reward sent + its dispatch settled, no endpoint):
 * see the tenant webhooks section of the README.
 */
export class TenantWebhooks1700000013000 implements MigrationInterface {
  name = 'TenantWebhooks1700000013000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE webhook_endpoints (
        id                    uuid          PRIMARY KEY,
        tenant_id             varchar(63)   NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        url                   varchar(2048) NOT NULL,
        events                text[]        NOT NULL CHECK (cardinality(events) > 0),
        secret_enc            text          NOT NULL,
        created_at            timestamptz   NOT NULL DEFAULT now(),
        consecutive_failures  integer       NOT NULL DEFAULT 0,
        failing_since         timestamptz,
        last_success_at       timestamptz,
        last_failure_at       timestamptz,
        last_error            text,
        disabled_at           timestamptz,
        disabled_reason       text
      )`);
    await queryRunner.query(
      `CREATE INDEX webhook_endpoints_active_idx ON webhook_endpoints (tenant_id) WHERE disabled_at IS NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, created_at)`,
    );
    await queryRunner.query(`
      CREATE TABLE webhook_outbox (
        id                uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
        endpoint_id       uuid          NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
        tenant_id         varchar(63)   NOT NULL,
        event_type        varchar(40)   NOT NULL,
        payload           jsonb         NOT NULL,
        status            varchar(12)   NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts          integer       NOT NULL DEFAULT 0,
        next_attempt_at   timestamptz   NOT NULL DEFAULT now(),
        queued_at         timestamptz   NOT NULL DEFAULT now(),
        last_attempt_at   timestamptz,
        last_status_code  integer,
        last_error        text,
        delivered_at      timestamptz,
        created_at        timestamptz   NOT NULL DEFAULT now()
      )`);
    // The workers' claim: due rows, oldest first.
    await queryRunner.query(
      `CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (next_attempt_at) WHERE status = 'pending'`,
    );
    // An endpoint's recent deliveries (the API), and housekeeping per endpoint.
    await queryRunner.query(
      `CREATE INDEX webhook_outbox_endpoint_idx ON webhook_outbox (endpoint_id, created_at DESC)`,
    );

    for (const statement of TENANT_EVENT_TRIGGERS.create) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of TENANT_EVENT_TRIGGERS.drop) await queryRunner.query(statement);
    await queryRunner.query(`DROP TABLE webhook_outbox`);
    await queryRunner.query(`DROP TABLE webhook_endpoints`);
  }
}

/**
 * The tenant event triggers and their functions, as this migration created them; 1700000017500-tenant-events-in-code
 * drops them (the events are built in code since) and its `down` creates them again from here.
 */
export const TENANT_EVENT_TRIGGERS = {
  create: [
    // One row per active endpoint of the tenant subscribed to the event. Called only by the trigger functions below.
    `
      CREATE FUNCTION rg_webhooks_enqueue(p_tenant text, p_type text, p_data jsonb) RETURNS void
      LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO webhook_outbox (endpoint_id, tenant_id, event_type, payload)
        SELECT e.id, e.tenant_id, p_type,
               jsonb_build_object('type', p_type,
                                  'timestamp', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                  'data', p_data)
          FROM webhook_endpoints e
         WHERE e.tenant_id = p_tenant AND e.disabled_at IS NULL AND e.events && ARRAY[p_type, '*'];
      END $$`,
    `
      CREATE FUNCTION rg_webhooks_reward_changed() RETURNS trigger
      LANGUAGE plpgsql AS $$
      DECLARE
        d record;
        v_type text;
      BEGIN
        -- Cheapest exit first: no active endpoint anywhere (one probe of an empty partial index).
        IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE disabled_at IS NULL) THEN RETURN NULL; END IF;
        -- Named columns only: a batch's request column (every reward's custom fields) is never read here.
        SELECT id, tenant_id, environment, idempotency_key INTO d FROM reward_dispatches WHERE id = NEW.dispatch_id;
        IF NOT FOUND THEN RETURN NULL; END IF;
        IF NEW.status = 'sent' AND OLD.status IS DISTINCT FROM 'sent'
           AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = d.tenant_id AND e.disabled_at IS NULL AND e.events && ARRAY['reward.sent', '*']) THEN
          PERFORM rg_webhooks_enqueue(d.tenant_id, 'reward.sent', jsonb_build_object(
            'tenant_id', d.tenant_id, 'dispatch_id', d.id, 'environment', d.environment,
            'idempotency_key', d.idempotency_key, 'position', NEW.position, 'external_id', NEW.external_id, 'status', NEW.status,
            'reward_id', NEW.upstream_reward_id, 'upstream_order_id', NEW.upstream_order_id,
            'upstream_order_status', NEW.upstream_order_status, 'delivery_method', NEW.delivery_method,
            'sent_at', to_char(coalesce(NEW.sent_at, clock_timestamp()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
        END IF;
        IF NEW.delivery_state IN ('delivered', 'delivery_failed') AND OLD.delivery_state IS DISTINCT FROM NEW.delivery_state THEN
          v_type := 'reward.' || NEW.delivery_state;
          IF EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = d.tenant_id AND e.disabled_at IS NULL AND e.events && ARRAY[v_type, '*']) THEN
            PERFORM rg_webhooks_enqueue(d.tenant_id, v_type, jsonb_build_object(
              'tenant_id', d.tenant_id, 'dispatch_id', d.id, 'environment', d.environment,
              'idempotency_key', d.idempotency_key, 'position', NEW.position, 'external_id', NEW.external_id, 'status', NEW.status,
              'reward_id', NEW.upstream_reward_id, 'upstream_order_id', NEW.upstream_order_id,
              'delivery_method', NEW.delivery_method, 'delivery_state', NEW.delivery_state,
              'delivery_status', NEW.delivery_status, 'delivery_reason', NEW.delivery_reason,
              'delivery_event_at', to_char(NEW.delivery_event_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
          END IF;
        END IF;
        RETURN NULL;
      END $$`,
    `
      CREATE TRIGGER webhooks_reward_changed
        AFTER UPDATE OF status, delivery_state ON dispatch_rewards
        FOR EACH ROW
        WHEN ((NEW.status = 'sent' AND OLD.status IS DISTINCT FROM 'sent')
              OR (NEW.delivery_state IN ('delivered', 'delivery_failed') AND OLD.delivery_state IS DISTINCT FROM NEW.delivery_state))
        EXECUTE FUNCTION rg_webhooks_reward_changed()`,
    `
      CREATE FUNCTION rg_webhooks_dispatch_completed() RETURNS trigger
      LANGUAGE plpgsql AS $$
      DECLARE
        v_counts jsonb;
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE disabled_at IS NULL) THEN RETURN NULL; END IF;
        IF NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = NEW.tenant_id AND e.disabled_at IS NULL AND e.events && ARRAY['dispatch.completed', '*']) THEN
          RETURN NULL;
        END IF;
        -- AFTER triggers run at the end of the statement: the rewards written by the same statement are visible.
        SELECT jsonb_object_agg(s.status, coalesce(c.n, 0)) INTO v_counts
          FROM unnest(ARRAY['pending', 'sending', 'sent', 'pending_approval', 'failed', 'cancelled']) AS s(status)
          LEFT JOIN (SELECT status, count(*)::int AS n FROM dispatch_rewards WHERE dispatch_id = NEW.id GROUP BY status) c
                 ON c.status = s.status;
        PERFORM rg_webhooks_enqueue(NEW.tenant_id, 'dispatch.completed', jsonb_build_object(
          'tenant_id', NEW.tenant_id, 'dispatch_id', NEW.id, 'environment', NEW.environment,
          'idempotency_key', NEW.idempotency_key, 'external_reference', NEW.request->>'external_reference',
          'status', NEW.status, 'counts', v_counts,
          'error_code', NEW.last_error->>'code',
          'created_at', to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
        RETURN NULL;
      END $$`,
    `
      CREATE TRIGGER webhooks_dispatch_completed
        AFTER UPDATE OF status ON reward_dispatches
        FOR EACH ROW
        WHEN (OLD.status IN ('sending', 'queued') AND NEW.status NOT IN ('sending', 'queued'))
        EXECUTE FUNCTION rg_webhooks_dispatch_completed()`,
    `
      CREATE FUNCTION rg_webhooks_connection_changed() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.status = 'needs_reauth' THEN
          IF EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = NEW.tenant_id AND e.disabled_at IS NULL AND e.events && ARRAY['connection.needs_reauth', '*']) THEN
            PERFORM rg_webhooks_enqueue(NEW.tenant_id, 'connection.needs_reauth', jsonb_build_object(
              'tenant_id', NEW.tenant_id, 'connection_id', NEW.id, 'environment', NEW.environment,
              'status', NEW.status, 'previous_status', OLD.status,
              'reason', NEW.last_error_code, 'message', NEW.last_error_message));
          END IF;
        ELSIF OLD.status = 'needs_reauth' AND NEW.status = 'active' THEN
          IF EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = NEW.tenant_id AND e.disabled_at IS NULL AND e.events && ARRAY['connection.recovered', '*']) THEN
            PERFORM rg_webhooks_enqueue(NEW.tenant_id, 'connection.recovered', jsonb_build_object(
              'tenant_id', NEW.tenant_id, 'connection_id', NEW.id, 'environment', NEW.environment,
              'status', NEW.status, 'previous_status', OLD.status, 'replaced_connection_id', NULL));
          END IF;
        ELSIF OLD.status = 'needs_reauth' AND NEW.status = 'disconnected' THEN
          -- A broken connection ended: if a new active one replaces it in this transaction (re-consent), the insert
          -- trigger reports the recovery. Remembered until the transaction ends.
          IF EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = NEW.tenant_id AND e.disabled_at IS NULL AND e.events && ARRAY['connection.recovered', '*']) THEN
            PERFORM set_config('rg_webhooks.replaced_broken', NEW.tenant_id || E'\\t' || NEW.environment || E'\\t' || NEW.id, true);
          END IF;
        END IF;
        RETURN NULL;
      END $$`,
    `
      CREATE TRIGGER webhooks_connection_changed
        AFTER UPDATE OF status ON connections
        FOR EACH ROW
        WHEN (OLD.status IS DISTINCT FROM NEW.status AND (NEW.status = 'needs_reauth' OR OLD.status = 'needs_reauth'))
        EXECUTE FUNCTION rg_webhooks_connection_changed()`,
    `
      CREATE FUNCTION rg_webhooks_connection_created() RETURNS trigger
      LANGUAGE plpgsql AS $$
      DECLARE
        v_replaced text := current_setting('rg_webhooks.replaced_broken', true);
      BEGIN
        IF v_replaced IS NULL OR v_replaced = ''
           OR split_part(v_replaced, E'\\t', 1) <> NEW.tenant_id OR split_part(v_replaced, E'\\t', 2) <> NEW.environment THEN
          RETURN NULL;
        END IF;
        PERFORM set_config('rg_webhooks.replaced_broken', '', true);
        PERFORM rg_webhooks_enqueue(NEW.tenant_id, 'connection.recovered', jsonb_build_object(
          'tenant_id', NEW.tenant_id, 'connection_id', NEW.id, 'environment', NEW.environment,
          'status', NEW.status, 'previous_status', 'needs_reauth',
          'replaced_connection_id', split_part(v_replaced, E'\\t', 3)));
        RETURN NULL;
      END $$`,
    `
      CREATE TRIGGER webhooks_connection_created
        AFTER INSERT ON connections
        FOR EACH ROW
        WHEN (NEW.status = 'active')
        EXECUTE FUNCTION rg_webhooks_connection_created()`,
  ],
  drop: [
    `DROP TRIGGER webhooks_connection_created ON connections`,
    `DROP TRIGGER webhooks_connection_changed ON connections`,
    `DROP TRIGGER webhooks_dispatch_completed ON reward_dispatches`,
    `DROP TRIGGER webhooks_reward_changed ON dispatch_rewards`,
    `DROP FUNCTION rg_webhooks_connection_created()`,
    `DROP FUNCTION rg_webhooks_connection_changed()`,
    `DROP FUNCTION rg_webhooks_dispatch_completed()`,
    `DROP FUNCTION rg_webhooks_reward_changed()`,
    `DROP FUNCTION rg_webhooks_enqueue(text, text, jsonb)`,
  ],
};
