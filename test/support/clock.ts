import { Clock } from '../../src/common/clock';

/**
 * A clock that stands still until a test moves it: `advance(ms)` moves it and wakes the sleepers whose time came
 * (in order). Starts at `start` (ms since the epoch).
 */
export class ManualClock extends Clock {
  private sleepers: { at: number; wake: () => void }[] = [];

  constructor(private current = Date.UTC(2030, 0, 1)) {
    super();
  }

  now(): number {
    return this.current;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((wake) => {
      this.sleepers.push({ at: this.current + Math.max(0, ms), wake });
      this.sleepers.sort((a, b) => a.at - b.at);
    });
  }

  advance(ms: number): void {
    this.current += ms;
    while (this.sleepers.length && this.sleepers[0].at <= this.current) this.sleepers.shift()?.wake();
  }
}

/**
 * The wall clock moved forward by whatever a test added (`advance`): for another OS process that must see the same
 * time as a sandbox whose clock the test moves too (`/__control/clock/advance`). Sleeps are real.
 */
export class OffsetClock extends Clock {
  private offsetMs = 0;

  now(): number {
    return Date.now() + this.offsetMs;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
