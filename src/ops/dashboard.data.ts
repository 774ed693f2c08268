import type { GaugeCount } from './ops-metrics.service';
import { CONNECTION_HEALTHS, CONNECTION_STATUSES } from './ops.service';

/** Connections per status and per health (a disconnected one has no health). */
export interface ConnectionSummary {
  status: Record<(typeof CONNECTION_STATUSES)[number], number>;
  health: Record<(typeof CONNECTION_HEALTHS)[number], number>;
}

/**
 * From the gauges' counts read now (OpsService.readGaugeCounts) rather than from their snapshot (up to 15 s old), so
 * the summary agrees with the table below it.
 */
export function connectionSummary(counts: GaugeCount[]): ConnectionSummary {
  const summary: ConnectionSummary = {
    status: Object.fromEntries(CONNECTION_STATUSES.map((s) => [s, 0])) as ConnectionSummary['status'],
    health: Object.fromEntries(CONNECTION_HEALTHS.map((h) => [h, 0])) as ConnectionSummary['health'],
  };
  for (const r of counts.filter((c) => c.metric === 'connections')) {
    if (r.label in summary.status) summary.status[r.label as keyof ConnectionSummary['status']] += r.n;
    if (r.health in summary.health) summary.health[r.health as keyof ConnectionSummary['health']] += r.n;
  }
  return summary;
}

export interface ActivityMinute {
  minute: Date;
  sent: number;
  failed: number;
}

/**
 * Rewards sent and failed per minute, the current minute and the 59 before it (empty ones included), read from the
 * partial indexes `dispatch_rewards_sent_at_idx` and `dispatch_rewards_failed_at_idx`: only the last hour's entries.
 * A `sent_at` ahead of the database's clock counts in the current minute.
 */
const LAST_MINUTE_SQL = `date_trunc('minute', now())`;
const FIRST_MINUTE_SQL = `(${LAST_MINUTE_SQL} - interval '59 minutes')`;
export const ACTIVITY_SQL = `
  WITH sent AS (
    SELECT least(date_trunc('minute', sent_at), ${LAST_MINUTE_SQL}) AS minute, count(*)::int AS n
      FROM dispatch_rewards
     WHERE sent_at >= ${FIRST_MINUTE_SQL}
     GROUP BY 1),
  failed AS (
    SELECT least(date_trunc('minute', updated_at), ${LAST_MINUTE_SQL}) AS minute, count(*)::int AS n
      FROM dispatch_rewards
     WHERE status = 'failed' AND updated_at >= ${FIRST_MINUTE_SQL}
     GROUP BY 1)
  SELECT m.minute, coalesce(s.n, 0) AS sent, coalesce(f.n, 0) AS failed
    FROM generate_series(${FIRST_MINUTE_SQL}, ${LAST_MINUTE_SQL}, interval '1 minute') AS m(minute)
    LEFT JOIN sent s ON s.minute = m.minute
    LEFT JOIN failed f ON f.minute = m.minute
   ORDER BY m.minute`;
