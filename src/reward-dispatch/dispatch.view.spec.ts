import {
  type RewardStatus,
  REWARD_STATUSES,
  countsOf,
  dueAt,
  failureOf,
  progressOf,
  statusOf,
} from './dispatch.view';

const counts = (c: Partial<Record<RewardStatus, number>>) =>
  ({ ...Object.fromEntries(REWARD_STATUSES.map((s) => [s, 0])), ...c }) as Record<RewardStatus, number>;

describe('statusOf: a dispatch’s status from its rewards', () => {
  it.each<[Partial<Record<RewardStatus, number>>, string | null]>([
    [{ pending: 1, sent: 3 }, null],
    [{ sending: 1 }, null],
    [{ sent: 4 }, 'sent'],
    [{ sent: 2, pending_approval: 1 }, 'pending_approval'],
    [{ pending_approval: 1 }, 'pending_approval'],
    [{ sent: 2, failed: 1 }, 'partially_failed'],
    [{ pending_approval: 1, cancelled: 1 }, 'partially_failed'],
    [{ failed: 3 }, 'failed'],
    [{ failed: 1, cancelled: 1 }, 'cancelled'],
    [{ cancelled: 2 }, 'cancelled'],
  ])('%j → %s', (c, status) => {
    expect(statusOf(counts(c))).toBe(status);
  });

  it('is what the sender derives from the rewards it holds', () => {
    const rewards = (...statuses: RewardStatus[]) => statuses.map((status) => ({ status }));
    expect(statusOf(countsOf(rewards('sent', 'failed')))).toBe('partially_failed');
    expect(statusOf(countsOf(rewards('sent', 'sending')))).toBeNull();
    expect(statusOf(countsOf(rewards('cancelled', 'failed')))).toBe('cancelled');
  });
});

describe('failureOf: the answer of a dispatch none of whose rewards went out', () => {
  it('takes the rewards’ common code, else upstream_rejected', () => {
    expect(failureOf('failed', ['insufficient_funds', 'insufficient_funds'])).toEqual({
      code: 'insufficient_funds',
      status: 422,
    });
    expect(failureOf('failed', ['insufficient_funds', 'upstream_rejected', 'order_failed'])).toEqual({
      code: 'upstream_rejected',
      status: 422,
    });
  });

  it('answers 503 when every failure was a give-up on an unavailable upstream', () => {
    expect(failureOf('failed', ['upstream_unavailable', 'upstream_rate_limited']).status).toBe(503);
    expect(failureOf('failed', ['upstream_unavailable', 'insufficient_funds']).status).toBe(422);
  });

  it('answers 409 when the dispatch was cancelled or its connection is not active', () => {
    expect(failureOf('cancelled', ['dispatch_cancelled'])).toEqual({
      code: 'dispatch_cancelled',
      status: 409,
    });
    expect(failureOf('cancelled', ['dispatch_cancelled', 'upstream_rejected']).status).toBe(409);
    expect(failureOf('failed', ['connection_not_active'])).toEqual({
      code: 'connection_not_active',
      status: 409,
    });
  });
});

describe('progressOf: a dispatch’s progress and when it should be done', () => {
  const NOW = Date.UTC(2030, 0, 1);

  it('counts settled rewards and estimates the end from the open ones at the account’s pace', () => {
    expect(progressOf(counts({ sent: 2, failed: 1, pending: 3, sending: 1 }), 100, NOW)).toEqual({
      total: 7,
      settled: 3,
      percent: 42.8,
      estimated_completion_at: new Date(NOW + 400).toISOString(),
    });
  });

  it('gives no estimate without a pace or once nothing is open; an empty dispatch is done', () => {
    expect(progressOf(counts({ pending: 2 }), null, NOW).estimated_completion_at).toBeNull();
    expect(progressOf(counts({ sent: 2 }), 100, NOW)).toEqual({
      total: 2,
      settled: 2,
      percent: 100,
      estimated_completion_at: null,
    });
    expect(progressOf(counts({}), 100, NOW).percent).toBe(100);
    expect(progressOf(counts({ sent: 1, pending: 3 }))).toEqual({
      total: 4,
      settled: 1,
      percent: 25,
      estimated_completion_at: null,
    });
  });

  it('counts the estimate from when the open rewards are due: the next attempt, or now', () => {
    const later = new Date(NOW + 60_000);
    expect(dueAt({ next_attempt_at: later }, NOW)).toBe(NOW + 60_000);
    expect(dueAt({ next_attempt_at: later.toISOString() as unknown as Date }, NOW)).toBe(NOW + 60_000);
    expect(dueAt({ next_attempt_at: new Date(NOW - 60_000) }, NOW)).toBe(NOW); // overdue: due now
    expect(dueAt({ next_attempt_at: null }, NOW)).toBe(NOW);
    expect(
      progressOf(counts({ pending: 2 }), 100, dueAt({ next_attempt_at: later }, NOW)).estimated_completion_at,
    ).toBe(new Date(NOW + 60_200).toISOString());
  });
});
