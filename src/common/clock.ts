import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Wall-clock time, behind an injectable seam: token expiry and the like are decided against `now()`, so tests move a
 * clock instead of sleeping. Declared as an abstract class so that it is its own dependency-injection token.
 */
export abstract class Clock {
  /** Milliseconds since the epoch. */
  abstract now(): number;
  /** Resolves after `ms` milliseconds of this clock. */
  abstract sleep(ms: number): Promise<void>;
}

/** The process's own clock (Date.now, timers). */
export const systemClock: Clock = { now: () => Date.now(), sleep: (ms) => sleep(ms).then(() => undefined) };
