import type { PacingConfig } from '../config/app-config';
import { PACING_MARGIN_MS, spacingMs } from './account-pacer';

/** The slots a GCRA with this spacing hands out to `n` requests asked at once on an idle account (ms from then). */
function slots(pacing: PacingConfig, n: number): number[] {
  const T = spacingMs(pacing);
  const tau = (pacing.burst - 1) * T;
  let tat = 0;
  return Array.from({ length: n }, () => {
    const slot = Math.max(0, tat - tau);
    tat = Math.max(tat, 0) + T;
    return slot;
  });
}

describe('spacingMs: the spacing between two requests of an account', () => {
  it('spreads the requests beyond a burst over a second widened by the margin', () => {
    expect(spacingMs({ rps: 10, burst: 1 })).toBe(110);
    expect(spacingMs({ rps: 10, burst: 3 })).toBe(137.5);
    expect(spacingMs({ rps: 1, burst: 1 })).toBe(1000 + PACING_MARGIN_MS);
  });

  it.each<PacingConfig>([
    { rps: 1, burst: 1 },
    { rps: 5, burst: 1 },
    { rps: 10, burst: 3 },
    { rps: 25, burst: 25 },
    { rps: 100, burst: 10 },
  ])('keeps any rps + 1 slots at least a second plus the margin apart (%j)', (pacing) => {
    const s = slots(pacing, 4 * pacing.rps + 1);
    expect(s.slice(0, pacing.burst).every((at) => at === 0)).toBe(true); // the burst goes back to back
    for (let i = 0; i + pacing.rps < s.length; i++)
      expect(s[i + pacing.rps] - s[i]).toBeGreaterThanOrEqual(1000 + PACING_MARGIN_MS - 1e-6);
  });
});
