import { deliveryOutcome } from './delivery-reconciler';
import { registrationRetryMs } from './webhook-registrar';

const NOW = Date.UTC(2030, 0, 1, 12);

describe('deliveryOutcome: what a read of a reward says of its delivery', () => {
  it('maps SUCCEEDED and FAILED (any case) to final states as of now', () => {
    expect(deliveryOutcome({ delivery: { status: 'succeeded' } }, NOW)).toEqual({
      state: 'delivered',
      status: 'SUCCEEDED',
      reason: null,
      eventAt: new Date(NOW),
    });
    expect(deliveryOutcome({ delivery: { status: 'FAILED', failure_reason: 'EMAIL_BOUNCED' } }, NOW)).toEqual(
      { state: 'delivery_failed', status: 'FAILED', reason: 'EMAIL_BOUNCED', eventAt: new Date(NOW) },
    );
  });

  it('keeps only a plain code as the failure reason', () => {
    expect(
      deliveryOutcome({ delivery: { status: 'FAILED', failure_reason: '<script>' } }, NOW).reason,
    ).toBeNull();
    expect(deliveryOutcome({ delivery: { status: 'FAILED', failure_reason: 42 } }, NOW).reason).toBeNull();
  });

  it('dates "still pending" by the reward’s creation, so that a webhook’s final event always wins', () => {
    const created = '2030-01-01T11:00:00Z';
    expect(deliveryOutcome({ created_at: created, delivery: { status: 'PENDING' } }, NOW)).toEqual({
      state: 'pending',
      status: 'PENDING',
      reason: null,
      eventAt: new Date(created),
    });
    // A creation time in the future (another clock) or none: now.
    expect(
      deliveryOutcome({ created_at: '2030-01-02T00:00:00Z', delivery: { status: 'PENDING' } }, NOW).eventAt,
    ).toEqual(new Date(NOW));
    expect(deliveryOutcome({ delivery: null }, NOW)).toEqual({
      state: 'pending',
      status: 'UNKNOWN',
      reason: null,
      eventAt: new Date(NOW),
    });
  });
});

describe('registrationRetryMs: the background retry of a delivery webhook registration', () => {
  it('doubles from the base per failed attempt, with ±20 % jitter', () => {
    expect(registrationRetryMs(1_000, 0, () => 0.5)).toBe(1_000);
    expect(registrationRetryMs(1_000, 3, () => 0.5)).toBe(8_000);
    expect(registrationRetryMs(1_000, 3, () => 0)).toBe(6_400);
    expect(registrationRetryMs(1_000, 3, () => 0.999999)).toBe(9_600);
  });

  it('never waits more than an hour (plus jitter), however many attempts', () => {
    expect(registrationRetryMs(1_000, 12, () => 0.5)).toBe(3_600_000);
    expect(registrationRetryMs(1_000, 1_000, () => 0.5)).toBe(3_600_000);
  });
});
