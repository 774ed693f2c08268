import { ManualClock } from '../../test/support/clock';
import { MetricsService } from '../metrics/metrics.service';
import type { UpstreamExchange } from '../rewards-api/call-recorder';
import { RewardsApiError } from '../rewards-api/rewards-api.errors';
import { ActivityRecorder, classify } from './activity.recorder';
import type { ActivityStore } from './activity.store';
import { serving } from '../common/request-context';

const CONNECTION = '0c9e6f0a-1b2c-4d5e-8f90-123456789abc';
const what = (over: Partial<UpstreamExchange> = {}): UpstreamExchange => ({
  connectionId: CONNECTION,
  operation: 'create_order',
  attempt: 1,
  throttled: 0,
  pacingWaitMs: 12.5,
  ...over,
});

/**
 * A recorder on a clock that stands still: what it buffers is counted (`pending`), never flushed here — the flush into
 * Postgres, and what the rows hold, are tested over HTTP (test/connection-activity.e2e-spec.ts).
 */
function recorder(enabled = true) {
  const store = null as unknown as ActivityStore; // never reached: nothing is flushed in these tests
  const clock = new ManualClock(Date.UTC(2030, 0, 1, 12));
  return new ActivityRecorder({ enabled, retentionDays: 30 }, clock, store, new MetricsService());
}

describe('activity recorder', () => {
  it('buffers one record per request and hands the answer back unchanged, inside `serving` or not', async () => {
    const r = recorder();
    const answer = { status: 201, body: { order: { id: 'O1' } } };
    const got = await serving({ dispatchId: 'd-1', rewardPosition: 3 }, () =>
      r.exchange(what({ attempt: 2, throttled: 1 }), async () => answer),
    );
    expect(got).toBe(answer);
    expect(await r.exchange(what(), async () => 'plain')).toBe('plain');
    expect(r.pending).toBe(2);
  });

  it('records a failure and rethrows the very error', async () => {
    const r = recorder();
    const error = new RewardsApiError('transient', 'slow down', 429, {}, 1);
    await expect(r.exchange(what(), () => Promise.reject(error))).rejects.toBe(error);
    expect(r.pending).toBe(1);
  });

  it('records nothing when switched off, or for a grant not stored yet (no connection id)', async () => {
    const off = recorder(false);
    expect(await off.exchange(what(), async () => ({ status: 200 }))).toEqual({ status: 200 });
    expect(off.pending).toBe(0);
    const on = recorder();
    await on.exchange(what({ connectionId: 'unstored-grant' }), async () => ({ status: 200 }));
    expect(on.pending).toBe(0);
  });

  it('classifies answers: outcomes and our error codes', () => {
    const e = (kind: RewardsApiError['kind'], status: number | null) =>
      new RewardsApiError(kind, 'x', status);
    const cases: [string, unknown, unknown][] = [
      ['create_order', e('transient', 503), ['unavailable', 'upstream_unavailable']],
      ['create_order', e('transient', null), ['unavailable', 'upstream_unavailable']],
      ['create_order', e('rejected', 402), ['rejected', 'insufficient_funds']],
      ['create_order', e('rejected', 409), ['rejected', 'external_id_conflict']],
      ['get_order', e('rejected', 404), ['rejected', 'upstream_not_found']],
      ['create_order', e('rejected', 400), ['rejected', 'upstream_rejected']],
      ['create_order', e('unauthorized', 401), ['unauthorized', null]],
      ['token_refresh', e('invalid_grant', 400), ['rejected', 'connection_not_active']],
      ['token_refresh', e('invalid_client', 401), ['rejected', 'upstream_app_credentials_invalid']],
      ['token_refresh', e('transient', 429), ['throttled', 'connection_refresh_failed']],
      ['token_refresh', e('transient', 500), ['unavailable', 'connection_refresh_failed']],
      ['probe', new Error('socket hang up'), ['unavailable', 'upstream_unavailable']],
    ];
    for (const [operation, error, expected] of cases) {
      const c = classify(operation as UpstreamExchange['operation'], error);
      expect([operation, c.outcome, c.errorCode]).toEqual([operation, ...(expected as unknown[])]);
    }
  });
});
