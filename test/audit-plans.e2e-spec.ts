import type { Client } from 'pg';
import { AUDIT_ACTIONS } from '../src/audit/audit-actions';
import { type AuditListFilter, PURGE_SQL, listingStatement } from '../src/audit/audit.store';
import { planDatabase, sequentialScans } from './support/plans';

const ROWS = 100_000;

/** Every form of the listing (each combination of filters, with and without a cursor) and the retention purge. */
function statements(): { name: string; text: string; values: unknown[] }[] {
  const forms: { name: string; text: string; values: unknown[] }[] = [];
  for (const tenantId of [undefined, 't7'])
    for (const action of [undefined, 'webhook_event.replayed'] as const)
      for (const beforeId of [undefined, '50000']) {
        const filter: AuditListFilter = { tenantId, action, beforeId, limit: 51 };
        const name = `list tenant=${tenantId ?? '-'} action=${action ?? '-'} cursor=${beforeId ?? '-'}`;
        forms.push({ name, ...listingStatement(filter) });
      }
  forms.push({ name: 'purge', text: PURGE_SQL, values: [new Date(Date.now() - 400 * 86_400_000), 1000] });
  return forms;
}

/**
 * The audit trail grows for AUDIT_RETENTION_DAYS: each listing form and the purge must reach their rows through an
 * index, not a scan of the trail, at 100,000 records — before statistics exist and after, as a custom plan and as
 * the generic plan a prepared statement would settle on.
 */
describe('audit trail statements: an index range at any size', () => {
  let client: Client;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ client, close } = await planDatabase('audit_events'));
    await client.query(
      `INSERT INTO audit_events (at, tenant_id, action, actor_type, via, details)
       SELECT now() - make_interval(mins => ($1 - n)), CASE WHEN n % 50 = 0 THEN NULL ELSE 't' || (n % 100) END,
              ($2::text[])[1 + n % cardinality($2::text[])], 'api_key', 'api', '{}'
         FROM generate_series(1, $1) AS n`,
      [ROWS, AUDIT_ACTIONS],
    );
  });
  afterAll(() => close());

  const scans = (mode: 'force_custom_plan' | 'force_generic_plan') =>
    sequentialScans(client, 'audit_events', statements(), mode);

  it('uses an index for every listing form and the purge, without statistics and after ANALYZE', async () => {
    expect(await scans('force_custom_plan')).toEqual([]);
    expect(await scans('force_generic_plan')).toEqual([]);
    await client.query(`ANALYZE audit_events`);
    expect(await scans('force_custom_plan')).toEqual([]);
    expect(await scans('force_generic_plan')).toEqual([]);
  });
});
