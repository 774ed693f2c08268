import type { Sql } from '../database/sql';
import { REWARD_STATUSES, type RewardStatus } from '../reward-dispatch/dispatch.view';

export interface RunningBatch {
  id: string;
  tenant_id: string;
  tenant_name: string;
  status: string;
  /** 1: a bulk batch; 0: an interactive send. */
  priority: number;
  created_at: Date;
  cancel_requested_at: Date | null;
  reward_count: number;
  counts: Record<RewardStatus, number>;
  /** Rewards no longer pending or sending. */
  done: number;
  /** The progress bar's maximum: reward_count, or the rows counted if more. */
  total: number;
}

export const RUNNING_BATCHES_SHOWN = 20;

/**
 * The newest running batches (queued or sending, more than one reward) from the partial index
 * `reward_dispatches_running_idx`, their rewards counted on dispatch_rewards' primary key: never a scan of either.
 */
export const RUNNING_BATCHES_SQL = `
  SELECT d.id, d.tenant_id, t.name AS tenant_name, d.status, d.priority, d.created_at, d.cancel_requested_at,
         d.reward_count, c.counts
    FROM (SELECT id, tenant_id, status, priority, created_at, cancel_requested_at, reward_count
            FROM reward_dispatches
           WHERE status IN ('queued', 'sending') AND reward_count > 1
           ORDER BY created_at DESC
           LIMIT $1) d
    JOIN tenants t ON t.id = d.tenant_id AND t.deleted_at IS NULL
    CROSS JOIN LATERAL (
      SELECT json_build_object(${REWARD_STATUSES.map((s) => `'${s}', count(*) FILTER (WHERE r.status = '${s}')`).join(', ')}) AS counts
        FROM dispatch_rewards r
       WHERE r.dispatch_id = d.id) c
   ORDER BY d.created_at DESC, d.id DESC`;

export async function runningBatches(db: Sql, limit = RUNNING_BATCHES_SHOWN): Promise<RunningBatch[]> {
  const { rows } = await db.query<Omit<RunningBatch, 'done' | 'total'>>(RUNNING_BATCHES_SQL, [limit]);
  return rows.map((batch) => {
    const { counts } = batch;
    const counted = REWARD_STATUSES.reduce((sum, s) => sum + counts[s], 0);
    return {
      ...batch,
      done: counted - counts.pending - counts.sending,
      total: Math.max(batch.reward_count, counted),
    };
  });
}
