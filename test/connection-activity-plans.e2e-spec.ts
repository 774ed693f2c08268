import type { Client } from 'pg';
import {
  ACTIVITY_OUTCOMES,
  type ActivityListFilter,
  PURGE_SQL,
  PURGE_TENANT_SQL,
  SUMMARY_SQL,
  listingStatement,
} from '../src/connection-activity/activity.store';
import { planDatabase, sequentialScans } from './support/plans';

const ROWS = 100_000;
const CONNECTION = '00000000-0000-4000-8000-000000000007';
const DISPATCH = '00000000-0000-4000-9000-000000000042';

/** Every form of the listing (each combination of filters, with and without a cursor), the dashboard's, the purge. */
function statements(): { name: string; text: string; values: unknown[] }[] {
  const forms: { name: string; text: string; values: unknown[] }[] = [];
  for (const dispatchId of [undefined, DISPATCH])
    for (const outcome of [undefined, 'success', 'throttled'] as const)
      for (const before of [undefined, { at: new Date(Date.now() - 30 * 60_000), id: '50000' }]) {
        const filter: ActivityListFilter = { tenantId: 't7', dispatchId, outcome, before, limit: 51 };
        const name = `list dispatch=${dispatchId ? 'x' : '-'} outcome=${outcome ?? '-'} cursor=${before ? 'x' : '-'}`;
        forms.push({ name, ...listingStatement(filter) });
      }
  forms.push({
    name: 'dashboard latest',
    ...listingStatement({ tenantId: 't7', connectionId: CONNECTION, limit: 50 }),
  });
  forms.push({
    name: 'dashboard summary',
    text: SUMMARY_SQL,
    values: ['t7', CONNECTION, new Date(Date.now() - 3600_000), 10_000],
  });
  forms.push({ name: 'purge', text: PURGE_SQL, values: [new Date(Date.now() - 30 * 86_400_000), 1000] });
  forms.push({ name: 'purge tenant', text: PURGE_TENANT_SQL, values: ['t7', 1000] });
  return forms;
}

/**
 * The activity grows with every upstream request for CONNECTION_ACTIVITY_RETENTION_DAYS: each listing form, the
 * dashboard's reads and the purge must reach their rows through an index, not a scan of the table, at 100,000 rows —
 * before statistics exist and after, as a custom plan and as the generic plan a prepared statement settles on.
 */
describe('connection activity statements: an index range at any size', () => {
  let client: Client;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ client, close } = await planDatabase('connection_activity'));
    await client.query(
      `INSERT INTO tenants (id, name) SELECT 't' || n, 'T' || n FROM generate_series(0, 99) AS n`,
    );
    // 100 tenants; a tenth of the requests serve no dispatch; one in 50 is not a success.
    await client.query(
      `INSERT INTO connection_activity (created_at, tenant_id, connection_id, operation, attempt, http_status, outcome,
                                        error_code, latency_ms, pacing_wait_ms, dispatch_id, reward_position)
       SELECT now() - make_interval(secs => ($1 - n) / 10.0), 't' || (n % 100),
              ('00000000-0000-4000-8000-' || lpad(to_hex(n % 100), 12, '0'))::uuid, 'create_order', 1,
              CASE WHEN n % 50 = 0 THEN 429 ELSE 200 END,
              CASE WHEN n % 50 = 0 THEN 'throttled' ELSE 'success' END,
              CASE WHEN n % 50 = 0 THEN 'upstream_rate_limited' END, 5 + n % 40, 0,
              CASE WHEN n % 10 = 0 THEN NULL ELSE gen_random_uuid() END, 0
         FROM generate_series(1, $1) AS n`,
      [ROWS],
    );
  });
  afterAll(() => close());

  const scans = (mode: 'force_custom_plan' | 'force_generic_plan') =>
    sequentialScans(client, 'connection_activity', statements(), mode);

  it('uses an index for every listing form, the dashboard and the purge, without statistics and after ANALYZE', async () => {
    expect(ACTIVITY_OUTCOMES).toContain('throttled');
    expect(await scans('force_custom_plan')).toEqual([]);
    expect(await scans('force_generic_plan')).toEqual([]);
    await client.query(`ANALYZE connection_activity`);
    expect(await scans('force_custom_plan')).toEqual([]);
    expect(await scans('force_generic_plan')).toEqual([]);
  });
});
