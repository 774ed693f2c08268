import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { purgeBatch } from '../retention/purge-batch';

/**
 * Every statement that writes `webhook_events`: the `uuid` of each delivery webhook handled, recorded after its change
 * was applied, with asynchronous commit (`relaxed`): losing it in a crash only costs a re-apply, which is idempotent.
 */
@Injectable()
export class WebhookEventStore {
  constructor(private readonly db: Database) {}

  async seen(uuid: string): Promise<boolean> {
    const { rowCount } = await this.db.main.query({
      name: 'rg_webhook_event_seen',
      text: `SELECT 1 FROM webhook_events WHERE uuid = $1`,
      values: [uuid],
    });
    return (rowCount ?? 0) > 0;
  }

  /** Records a handled event; false when it was recorded already (a concurrent duplicate). */
  async record(uuid: string, connectionId: string | null, event: string): Promise<boolean> {
    const { rowCount } = await this.db.relaxed.query({
      name: 'rg_webhook_event_record',
      // A connection removed meanwhile (its tenant deleted) has nothing left to protect: nothing is recorded for it.
      text: `INSERT INTO webhook_events (uuid, connection_id, event)
             SELECT $1, $2, $3 WHERE $2::uuid IS NULL OR EXISTS (SELECT 1 FROM connections WHERE id = $2::uuid)
             ON CONFLICT (uuid) DO NOTHING`,
      values: [uuid, connectionId, event],
    });
    return rowCount === 1;
  }

  /** Retention: deletes up to `limit` events received before `olderThan`; returns how many. */
  purgeOlderThan(olderThan: Date, limit: number): Promise<number> {
    const text = `DELETE FROM webhook_events WHERE uuid IN (
       SELECT uuid FROM webhook_events WHERE received_at < $1 ORDER BY received_at LIMIT $2)`;
    return purgeBatch(this.db.main, text, olderThan, limit);
  }

  /** A deleted tenant: up to `limit` events of its connections (`webhook_events_connection_idx`); returns how many. */
  purgeTenant(tenantId: string, limit: number): Promise<number> {
    const text = `DELETE FROM webhook_events WHERE uuid = ANY(ARRAY(
       SELECT e.uuid FROM connections c, LATERAL (SELECT uuid FROM webhook_events WHERE connection_id = c.id LIMIT $2) e
        WHERE c.tenant_id = $1 LIMIT $2))`;
    return purgeBatch(this.db.main, text, tenantId, limit);
  }
}
