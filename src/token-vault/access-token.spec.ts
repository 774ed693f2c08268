import { normaliseTokenResponse } from '../rewards-api/rewards-api.client';
import { REFRESH_SKEW_MS, usableUntil } from './access-token.provider';

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
    expect(normaliseTokenResponse({ access_token: 'a', expires_in: 60 }).refreshToken).toBeUndefined();
  });

  it('refreshes early by a skew that never exceeds a tenth of the lifetime', () => {
    expect(usableUntil(0, 7_200_000)).toBe(7_200_000 - REFRESH_SKEW_MS);
    expect(usableUntil(0, 2_000)).toBe(1_800); // a 2-second token is used for 1.8 s
  });
});
