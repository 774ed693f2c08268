/**
 * Group commit: many callers' statements share one round-trip and one commit. No timer: the first item goes at once,
 * alone; items arriving while a flight is under way go together after it, up to `maxBatch`. `run` returns one result
 * per item, in order; a failed batch is run again item by item, so one bad item cannot fail the others.
 */
export class GroupCommit<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private flying = false;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = 64,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flying) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flying = true;
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const results = await this.run(batch.map((b) => b.item));
          batch.forEach((b, i) => b.resolve(results[i]));
        } catch (error) {
          if (batch.length === 1) {
            batch[0].reject(error);
            continue;
          }
          // Isolate the failure: each item alone (still in order, still before the next batch).
          for (const b of batch) {
            try {
              b.resolve((await this.run([b.item]))[0]);
            } catch (e) {
              b.reject(e);
            }
          }
        }
      }
    } finally {
      this.flying = false;
    }
  }
}
