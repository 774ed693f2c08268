import { backoffMs } from './dispatch.sender';

describe('backoffMs: when a queued dispatch is tried again', () => {
  afterEach(() => jest.restoreAllMocks());

  it('doubles with each attempt, with "equal jitter": between half and all of it', () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    expect([1, 2, 3, 4].map((attempts) => backoffMs(1_000, attempts))).toEqual([500, 1_000, 2_000, 4_000]);
    jest.spyOn(Math, 'random').mockReturnValue(0.999_999);
    expect([1, 2, 3, 4].map((attempts) => backoffMs(1_000, attempts))).toEqual([1_000, 2_000, 4_000, 8_000]);
  });

  it('is capped (5 minutes unless told), and a first attempt counts as one', () => {
    jest.spyOn(Math, 'random').mockReturnValue(0.999_999);
    expect(backoffMs(1_000, 20)).toBe(300_000);
    expect(backoffMs(1_000, 20, 10_000)).toBe(10_000);
    expect(backoffMs(1_000, 0)).toBe(1_000);
  });
});
