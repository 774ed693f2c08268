import type { Clock } from '../common/clock';

export const ACTIVITY_BUFFER = {
  /** Rows held at most; beyond, new rows are dropped. */
  capacity: 20_000,
  /** A flush starts as soon as this many rows wait. */
  batchSize: 500,
  maxRowsPerWrite: 2_000,
  /** The longest a row waits for its flush. */
  intervalMs: 1_000,
};
export type ActivityBufferOptions = Readonly<typeof ACTIVITY_BUFFER>;

/**
 * A bounded in-process buffer written in batches: `add` never waits or throws. One flush at a time, after
 * `intervalMs` or at `batchSize` rows. A full buffer or a failed write drops rows (reported, never retried: the
 * buffer stays bounded); `close` flushes what is left and drops whatever comes after.
 */
export class ActivityBuffer<T> {
  private rows: T[] = [];
  private timed = false;
  private flushing: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly options: ActivityBufferOptions,
    private readonly clock: Clock,
    private readonly write: (rows: T[]) => Promise<void>,
    private readonly dropped: (
      count: number,
      reason: 'buffer_full' | 'write_failed' | 'closed',
      error?: unknown,
    ) => void,
  ) {}

  get size(): number {
    return this.rows.length;
  }

  add(row: T): void {
    if (this.closed) return this.dropped(1, 'closed');
    if (this.rows.length >= this.options.capacity) return this.dropped(1, 'buffer_full');
    this.rows.push(row);
    if (this.rows.length >= this.options.batchSize) void this.flush();
    else if (!this.timed) {
      this.timed = true;
      void this.clock.sleep(this.options.intervalMs).then(() => {
        this.timed = false;
        return this.flush();
      });
    }
  }

  flush(): Promise<void> {
    this.flushing ??= this.drain().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
  }

  private async drain(): Promise<void> {
    let first = true;
    // The first write takes what waits; more follow while a full batch waits (or, closing, until none is left).
    while (this.rows.length && (first || this.closed || this.rows.length >= this.options.batchSize)) {
      first = false;
      const batch = this.rows.splice(0, this.options.maxRowsPerWrite);
      try {
        await this.write(batch);
      } catch (error) {
        this.dropped(batch.length, 'write_failed', error);
      }
    }
  }
}
