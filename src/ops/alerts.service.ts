import { createHmac } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock';
import type { OpsConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import { AppCredentialsStore } from '../token-vault/app-credentials.store';
import { ConnectionStateStore } from '../connections/connection-state.store';
import { batchDelete, purgeBatch } from '../retention/purge-batch';

export const SIGNATURE_HEADER = 'X-Rewards-Gateway-Signature';
const MAX_ATTEMPTS = 12;
const BASE_DELAY_MS = 1_000;
const MAX_DELAY_MS = 10 * 60_000;

/** The wait after an alert's `attempts`-th failed delivery: doubling from 1 s, at most 10 min. */
export function alertRetryDelayMs(attempts: number): number {
  return Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (Math.max(1, attempts) - 1));
}

/** `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`: the timestamp lets receivers refuse replays. */
export function signAlert(secret: string, body: string, timestamp: number): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** An alert: about a connection, or (no connection) an environment. */
type Alert = { connectionId: string | null; kind: string; payload: Record<string, unknown> };

/**
 * Alerts when a connection becomes broken or recovers, or an environment's app credentials are refused: each
 * transition claimed once across instances, then delivered to OPS_WEBHOOK_URL, signed, retried with backoff.
 */
@Injectable()
export class AlertsService {
  private readonly logger = new Logger(AlertsService.name);

  constructor(
    @InjectConfig('ops') private readonly config: OpsConfig,
    private readonly db: Database,
    private readonly connectionState: ConnectionStateStore,
    private readonly appCredentials: AppCredentialsStore,
    private readonly clock: Clock,
  ) {}

  /** Claims new transitions and writes their alerts in the same transaction; returns how many. */
  async detectTransitions(): Promise<number> {
    const alerts = await this.db.transaction(async (tx) => {
      const connections = await this.connectionState.claimAlertTransitions(tx);
      const environments = await this.appCredentials.claimAlertTransitions(tx);
      const rows: Alert[] = [
        ...connections.map((c) => ({
          connectionId: c.id,
          kind: c.kind,
          payload: {
            connection_id: c.id,
            tenant_id: c.tenant_id,
            environment: c.environment,
            status: c.status,
            last_error: c.last_error_code,
            message: c.last_error_message,
          },
        })),
        ...environments.map((e) => ({
          connectionId: null,
          kind: e.kind,
          payload: { environment: e.environment, message: e.message, since: e.since },
        })),
      ];
      for (const alert of rows) await this.raise(tx, alert);
      return rows;
    });
    for (const { connectionId, kind, payload } of alerts) {
      const fields = { alert: kind, event: kind, ...payload };
      if (connectionId) this.logger.warn(fields, `connection alert: ${kind}`);
      else this.logger.error(fields, `environment alert: ${kind}`);
    }
    return alerts.length;
  }

  /** Writes an alert in the caller's transaction: a transition, or an event such as a re-consent refused. */
  async raise(tx: Sql, { connectionId, kind, payload }: Alert): Promise<void> {
    await tx.query(`INSERT INTO ops_alerts (connection_id, kind, payload) VALUES ($1, $2, $3)`, [
      connectionId,
      kind,
      { event: kind, ...payload, at: new Date(this.clock.now()).toISOString() },
    ]);
  }

  async deliverDue(): Promise<number> {
    const { webhookUrl, webhookSecret } = this.config;
    if (!webhookUrl || !webhookSecret) return 0;
    const { rows: due } = await this.db.main.query<{
      id: string;
      payload: Record<string, unknown>;
      attempts: number;
    }>(
      `UPDATE ops_alerts a SET attempts = a.attempts + 1, next_attempt_at = now() + interval '30 seconds'
         FROM (SELECT id FROM ops_alerts WHERE delivered_at IS NULL AND attempts < $1 AND next_attempt_at <= now()
                ORDER BY id LIMIT 20 FOR UPDATE SKIP LOCKED) d
        WHERE a.id = d.id RETURNING a.id, a.payload, a.attempts`,
      [MAX_ATTEMPTS],
    );
    let delivered = 0;
    for (const alert of due) {
      const body = JSON.stringify({ id: String(alert.id), ...alert.payload });
      const timestamp = Math.floor(this.clock.now() / 1000);
      try {
        const res = await fetch(webhookUrl, {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            [SIGNATURE_HEADER]: signAlert(webhookSecret, body, timestamp),
          },
          body,
          signal: AbortSignal.timeout(5_000),
          redirect: 'manual', // the signed alert goes to OPS_WEBHOOK_URL and nowhere else
        });
        await res.body?.cancel().catch(() => undefined);
        if (res.status >= 300 && res.status < 400)
          throw new Error(`receiver answered ${res.status} (a redirect; redirects are not followed)`);
        if (!res.ok) throw new Error(`receiver answered ${res.status}`);
        await this.db.main.query(
          `UPDATE ops_alerts SET delivered_at = now(), last_error = NULL WHERE id = $1`,
          [alert.id],
        );
        delivered += 1;
      } catch (error) {
        const delay = alertRetryDelayMs(alert.attempts);
        await this.db.main.query(
          `UPDATE ops_alerts SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3::float8 / 1000) WHERE id = $1`,
          [alert.id, error instanceof Error ? error.message : String(error), delay],
        );
      }
    }
    return delivered;
  }

  /** Retention: deletes up to `limit` alerts raised before `olderThan`, oldest first. */
  purgeOlderThan(olderThan: Date, limit: number): Promise<number> {
    return purgeBatch(this.db.main, batchDelete.oldest('ops_alerts', 'created_at'), olderThan, limit);
  }
}
