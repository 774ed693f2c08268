import { createHmac } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';

export const SIGNATURE_HEADER = 'X-Rewards-Gateway-Signature';
const MAX_ATTEMPTS = 12;
const BASE_DELAY_MS = 1_000;
const MAX_DELAY_MS = 10 * 60_000;

/** `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` — the timestamp lets receivers refuse replays. */
export function signAlert(secret: string, body: string, timestamp: number): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/**
 * Alerts when a connection becomes broken (needs_reauth) or recovers (active again, or replaced by a new
 * connection after re-consent). Transitions are detected by one statement that flips `alerted_state` under the row
 * lock, so each transition produces exactly one alert whatever the number of instances; the alert row is then
 * delivered to OPS_WEBHOOK_URL, signed, and retried with backoff until it succeeds.
 */
@Injectable()
export class AlertsService {
  private readonly logger = new Logger(AlertsService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  /** Records new transitions as alerts; returns how many. */
  async detectTransitions(): Promise<number> {
    const inserted = (await this.db.query(
      `WITH prev AS (
         SELECT id, alerted_state AS previous FROM connections
          WHERE status <> 'disconnected'
            AND alerted_state IS DISTINCT FROM (CASE WHEN status = 'needs_reauth' THEN 'broken' ELSE 'ok' END)
          FOR UPDATE SKIP LOCKED
       ), flipped AS (
         UPDATE connections c
            SET alerted_state = CASE WHEN c.status = 'needs_reauth' THEN 'broken' ELSE 'ok' END
           FROM prev WHERE c.id = prev.id
          RETURNING c.id, c.tenant_id, c.environment, c.status, c.alerted_state, c.last_error_code, c.last_error_message, prev.previous
       ), replaced AS (
         UPDATE connections old SET alerted_state = 'closed'
          WHERE old.status = 'disconnected' AND old.alerted_state = 'broken'
            AND EXISTS (SELECT 1 FROM connections n WHERE n.tenant_id = old.tenant_id AND n.environment = old.environment AND n.status IN ('active', 'error'))
          RETURNING old.id, old.tenant_id, old.environment
       ), alerts AS (
         SELECT id, CASE WHEN alerted_state = 'broken' THEN 'connection.broken' ELSE 'connection.recovered' END AS kind,
                tenant_id, environment, status, last_error_code, last_error_message
           FROM flipped WHERE alerted_state = 'broken' OR previous = 'broken'
         UNION ALL
         SELECT id, 'connection.recovered', tenant_id, environment, 'replaced', NULL, NULL FROM replaced
       )
       INSERT INTO ops_alerts (connection_id, kind, payload)
       SELECT id, kind, jsonb_build_object('event', kind, 'connection_id', id, 'tenant_id', tenant_id, 'environment', environment,
                                           'status', status, 'last_error', last_error_code, 'message', last_error_message, 'at', now())
         FROM alerts
       RETURNING id, kind, payload`,
    )) as { id: string; kind: string; payload: Record<string, unknown> }[];
    for (const alert of inserted) this.logger.warn({ alert: alert.kind, ...alert.payload }, `connection alert: ${alert.kind}`);
    return inserted.length + (await this.detectEnvironmentTransitions());
  }

  /**
   * Environment-wide alerts: the gateway's own app credentials refused (`app_credentials.invalid`) and accepted again
   * (`app_credentials.recovered`). `alerted_at` flips under the row lock: one alert per transition across instances.
   */
  private async detectEnvironmentTransitions(): Promise<number> {
    const inserted = (await this.db.query(
      `WITH flipped AS (
         UPDATE rewards_environments SET alerted_at = CASE WHEN app_credentials_invalid_at IS NULL THEN NULL ELSE now() END
          WHERE (app_credentials_invalid_at IS NOT NULL AND alerted_at IS NULL) OR (app_credentials_invalid_at IS NULL AND alerted_at IS NOT NULL)
          RETURNING name, app_credentials_invalid_at, app_credentials_message
       )
       INSERT INTO ops_alerts (connection_id, kind, payload)
       SELECT NULL, CASE WHEN app_credentials_invalid_at IS NULL THEN 'app_credentials.recovered' ELSE 'app_credentials.invalid' END,
              jsonb_build_object('event', CASE WHEN app_credentials_invalid_at IS NULL THEN 'app_credentials.recovered' ELSE 'app_credentials.invalid' END,
                                 'environment', name, 'message', app_credentials_message, 'since', app_credentials_invalid_at, 'at', now())
         FROM flipped
       RETURNING id, kind, payload`,
    )) as { id: string; kind: string; payload: Record<string, unknown> }[];
    for (const alert of inserted) this.logger.error({ alert: alert.kind, ...alert.payload }, `environment alert: ${alert.kind}`);
    return inserted.length;
  }

  /** Delivers due alerts (one instance each, SKIP LOCKED); returns how many were delivered. */
  async deliverDue(): Promise<number> {
    const { webhookUrl, webhookSecret } = this.config.ops;
    if (!webhookUrl || !webhookSecret) return 0;
    const [due] = (await this.db.query(
      `UPDATE ops_alerts a SET attempts = a.attempts + 1, next_attempt_at = now() + interval '30 seconds'
         FROM (SELECT id FROM ops_alerts WHERE delivered_at IS NULL AND attempts < $1 AND next_attempt_at <= now()
                ORDER BY id LIMIT 20 FOR UPDATE SKIP LOCKED) d
        WHERE a.id = d.id RETURNING a.id, a.payload, a.attempts`,
      [MAX_ATTEMPTS],
    )) as [{ id: string; payload: Record<string, unknown>; attempts: number }[], number];
    let delivered = 0;
    for (const alert of due) {
      const body = JSON.stringify({ id: String(alert.id), ...alert.payload });
      const timestamp = Math.floor(Date.now() / 1000);
      try {
        const res = await fetch(webhookUrl, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', [SIGNATURE_HEADER]: signAlert(webhookSecret, body, timestamp) },
          body,
          signal: AbortSignal.timeout(5_000),
        });
        if (!res.ok) throw new Error(`receiver answered ${res.status}`);
        await this.db.query(`UPDATE ops_alerts SET delivered_at = now(), last_error = NULL WHERE id = $1`, [alert.id]);
        delivered += 1;
      } catch (error) {
        const delay = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (alert.attempts - 1));
        await this.db.query(`UPDATE ops_alerts SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3::float8 / 1000) WHERE id = $1`, [
          alert.id,
          error instanceof Error ? error.message : String(error),
          delay,
        ]);
      }
    }
    return delivered;
  }
}
