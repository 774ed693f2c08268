import { ManualClock } from '../../test/support/clock';
import { ActivityBuffer, type ActivityBufferOptions } from './activity-buffer';

const OPTIONS: ActivityBufferOptions = { capacity: 10, batchSize: 4, maxRowsPerWrite: 3, intervalMs: 1_000 };

/** A buffer of numbers whose writes are kept (or refused), and its drops; time moves only when the test moves it. */
function setup(options = OPTIONS) {
  const clock = new ManualClock();
  const writes: number[][] = [];
  const drops: { count: number; reason: string }[] = [];
  let failing = false;
  let release: (() => void) | null = null;
  let holding = false;
  const buffer = new ActivityBuffer<number>(
    options,
    clock,
    async (rows) => {
      if (holding) await new Promise<void>((r) => (release = r));
      if (failing) throw new Error('database unavailable');
      writes.push(rows);
    },
    (count, reason) => drops.push({ count, reason }),
  );
  // Lets queued promise callbacks (a timer's flush, a write) run; no time passes.
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Promise.resolve();
  };
  return {
    clock,
    buffer,
    writes,
    drops,
    settle,
    fail: (on: boolean) => (failing = on),
    hold: () => (holding = true),
    unhold: () => {
      holding = false;
      release?.();
    },
  };
}

describe('activity buffer', () => {
  it('writes nothing before its interval, then everything waiting in one write', async () => {
    const s = setup();
    s.buffer.add(1);
    s.buffer.add(2);
    await s.settle();
    s.clock.advance(999);
    await s.settle();
    expect(s.writes).toEqual([]);
    s.clock.advance(1);
    await s.settle();
    expect(s.writes).toEqual([[1, 2]]);
    expect(s.buffer.size).toBe(0);
  });

  it('flushes at once when a batch is full, without waiting for the interval', async () => {
    const s = setup();
    for (const n of [1, 2, 3, 4]) s.buffer.add(n);
    await s.settle();
    // At most maxRowsPerWrite rows a statement; the flush goes on only while a full batch waits, so the row left
    // waits for the timer the first row started.
    expect(s.writes).toEqual([[1, 2, 3]]);
    expect(s.buffer.size).toBe(1);
    s.clock.advance(1_000);
    await s.settle();
    expect(s.writes).toEqual([[1, 2, 3], [4]]);
  });

  it('drops and counts rows beyond its capacity; never blocks the caller', async () => {
    const s = setup({ ...OPTIONS, batchSize: 100 });
    for (let n = 0; n < 13; n++) s.buffer.add(n);
    expect(s.buffer.size).toBe(10);
    expect(s.drops).toEqual([
      { count: 1, reason: 'buffer_full' },
      { count: 1, reason: 'buffer_full' },
      { count: 1, reason: 'buffer_full' },
    ]);
    s.clock.advance(1_000);
    await s.settle();
    // The timer's flush takes what waits, maxRowsPerWrite a statement, and stops once less than a batch is left.
    expect(s.writes).toEqual([[0, 1, 2]]);
  });

  it('runs one flush at a time; rows arriving meanwhile get their own timer', async () => {
    const s = setup();
    s.hold();
    s.buffer.add(1);
    s.clock.advance(1_000);
    await s.settle();
    s.buffer.add(2);
    const second = s.buffer.flush();
    s.unhold();
    await second;
    await s.settle();
    expect(s.writes).toEqual([[1]]);
    s.clock.advance(1_000);
    await s.settle();
    expect(s.writes).toEqual([[1], [2]]);
  });

  it('counts a failed write as dropped rows and keeps going', async () => {
    const s = setup();
    s.fail(true);
    s.buffer.add(1);
    s.buffer.add(2);
    s.clock.advance(1_000);
    await s.settle();
    expect(s.drops).toEqual([{ count: 2, reason: 'write_failed' }]);
    s.fail(false);
    s.buffer.add(3);
    s.clock.advance(1_000);
    await s.settle();
    expect(s.writes).toEqual([[3]]);
  });

  it('close writes everything left, in as many writes as needed, and takes no more rows', async () => {
    const s = setup({ ...OPTIONS, batchSize: 100 });
    for (let n = 0; n < 7; n++) s.buffer.add(n);
    await s.buffer.close();
    expect(s.writes).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
    s.buffer.add(8);
    expect(s.drops).toEqual([{ count: 1, reason: 'closed' }]);
    expect(s.buffer.size).toBe(0);
  });
});
