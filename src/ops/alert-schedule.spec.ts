import { ManualClock } from '../../test/support/clock';
import { alertRetryDelayMs, signAlert } from './alerts.service';
import { OpsMetricsService } from './ops-metrics.service';
import type { MetricsService } from '../metrics/metrics.service';

describe('alertRetryDelayMs: the backoff of an alert that could not be delivered', () => {
  it('doubles from 1 s per failed attempt and stops at 10 min', () => {
    expect([1, 2, 3, 4, 10].map(alertRetryDelayMs)).toEqual([1_000, 2_000, 4_000, 8_000, 512_000]);
    expect(alertRetryDelayMs(11)).toBe(600_000);
    expect(alertRetryDelayMs(50)).toBe(600_000);
  });
});

describe('signAlert', () => {
  it('signs the timestamp with the body, so a replay at another time does not verify', () => {
    const a = signAlert('secret', '{"id":"1"}', 1_900_000_000);
    expect(a).toMatch(/^t=1900000000,v1=[0-9a-f]{64}$/);
    expect(signAlert('secret', '{"id":"1"}', 1_900_000_001)).not.toBe(a);
  });
});

describe('OpsMetricsService: the age of the snapshot the gauges serve', () => {
  function withGauges() {
    const gauges = new Map<string, () => number | undefined>();
    const metrics = {
      gauge: (
        name: string,
        _help: string,
        _labels: string[],
        collect: (set: (l: object, v: number) => void) => void,
      ) => {
        gauges.set(name, () => {
          let value: number | undefined;
          collect((_l, v) => (value = v));
          return value;
        });
      },
    } as unknown as MetricsService;
    return { metrics, age: () => gauges.get('rg_metrics_snapshot_age_seconds')?.() };
  }

  it('counts from start-up until the first snapshot, then from the latest one', async () => {
    const clock = new ManualClock();
    const { metrics, age } = withGauges();
    const ops = new OpsMetricsService(metrics, async () => [], clock);
    clock.advance(7_000);
    expect(age()).toBe(7);
    await ops.refresh();
    expect(age()).toBe(0);
    clock.advance(15_500);
    expect(age()).toBe(15.5);
  });
});
