import { retryDelayMs } from './webhook-events';

describe('retryDelayMs: when a failed tenant webhook delivery is tried again', () => {
  const schedule = [1_000, 5_000, 30_000];

  it('follows WEBHOOK_RETRY_SCHEDULE_MS by attempt, then keeps its last step', () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4, 20].map((a) => retryDelayMs(schedule, a, mid))).toEqual([
      1_000, 5_000, 30_000, 30_000, 30_000,
    ]);
    expect(retryDelayMs(schedule, 0, mid)).toBe(1_000);
  });

  it('spreads each step by ±10 %, never below 1 ms', () => {
    expect(retryDelayMs(schedule, 2, () => 0)).toBe(4_500);
    expect(retryDelayMs(schedule, 2, () => 0.999999)).toBe(5_500);
    expect(retryDelayMs([0], 1, () => 0)).toBe(1);
  });
});
