import { normaliseTokenResponse } from '../rewards-api/rewards-api.client';
import { ManualClock } from '../../test/support/clock';
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  EXPIRY_MARGIN_MS,
  REFRESH_SKEW_MS,
  judgeUnauthorized,
  refreshBackoffMs,
  usableUntil,
  validAt,
} from './access-token.provider';

describe('token expiry', () => {
  it('is created_at + expires_in', () => {
    const now = 1_800_000_000_000;
    const t = normaliseTokenResponse(
      { access_token: 'a', refresh_token: 'r', expires_in: 7200, created_at: now / 1000 - 100 },
      now,
    );
    expect(t.issuedAt.getTime()).toBe(now - 100_000);
    expect(t.expiresAt.getTime()).toBe(now - 100_000 + 7_200_000);
  });

  it('uses the receipt time when created_at is missing or in the future', () => {
    const now = 1_800_000_000_000;
    expect(normaliseTokenResponse({ access_token: 'a', expires_in: 60 }, now).issuedAt.getTime()).toBe(now);
    expect(
      normaliseTokenResponse(
        { access_token: 'a', expires_in: 60, created_at: now / 1000 + 3600 },
        now,
      ).issuedAt.getTime(),
    ).toBe(now);
  });

  it('keeps the old refresh token when the response has none', () => {
    expect(
      normaliseTokenResponse({ access_token: 'a', expires_in: 60 }, 1_800_000_000_000).refreshToken,
    ).toBeUndefined();
  });

  it('refreshes early by a skew that never exceeds a tenth of the lifetime', () => {
    expect(usableUntil(0, 7_200_000)).toBe(7_200_000 - REFRESH_SKEW_MS);
    expect(usableUntil(0, 2_000)).toBe(1_800); // a 2-second token is used for 1.8 s
  });
});

describe('a 401 and the grant', () => {
  const clock = new ManualClock();
  const lifetime = 3_000;
  const token = (generation: number) => ({ generation, expiresAt: clock.now() + lifetime });

  it('counts a token as valid until the margin before it expires', () => {
    const t = token(1);
    expect(validAt(t.expiresAt, clock.now())).toBe(true);
    expect(validAt(t.expiresAt, t.expiresAt - EXPIRY_MARGIN_MS - 1)).toBe(true);
    expect(validAt(t.expiresAt, t.expiresAt - EXPIRY_MARGIN_MS)).toBe(false);
    expect(validAt(t.expiresAt, t.expiresAt + 1)).toBe(false);
  });

  it('is nobody’s fault when the token may have expired before the service read it', () => {
    const t = token(1);
    clock.advance(lifetime - EXPIRY_MARGIN_MS); // answered this late: the service may have read it expired
    expect(judgeUnauthorized(t, clock.now(), null)).toBe('expired');
    // Even after an earlier refusal: a fresh token that waited too long proves nothing.
    expect(judgeUnauthorized({ ...t, generation: 2 }, clock.now(), 1)).toBe('expired');
  });

  it('forces one refresh for a valid token refused, and blames the grant only when the fresh one is refused too', () => {
    const first = token(1);
    clock.advance(50);
    expect(judgeUnauthorized(first, clock.now(), null)).toBe('refused');
    const fresh = token(2);
    clock.advance(50);
    expect(judgeUnauthorized(fresh, clock.now(), 1)).toBe('grant_refused');
    // The same token again (not newer than the one refused): another refresh, no verdict on the grant.
    expect(judgeUnauthorized(first, clock.now(), 1)).toBe('refused');
  });
});

describe('the cooldown after transient refresh failures', () => {
  it('doubles from the base with each failure in a row', () => {
    expect([1, 2, 3, 4].map(refreshBackoffMs)).toEqual([2_000, 4_000, 8_000, 16_000]);
    expect(refreshBackoffMs(1)).toBe(BACKOFF_BASE_MS);
  });

  it('is capped at five minutes', () => {
    expect(refreshBackoffMs(8)).toBe(256_000);
    expect(refreshBackoffMs(9)).toBe(BACKOFF_MAX_MS);
    expect(refreshBackoffMs(50)).toBe(300_000);
  });
});
