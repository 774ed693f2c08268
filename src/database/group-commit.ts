/**
 * Group commit at the application level: statements of many callers share one round-trip and one commit (one WAL
 * flush). No timer: the first item goes at once, alone; items that arrive while a flight is under way wait for it and
 * then go together, up to `maxBatch`. So a single caller never waits for anyone, and under load the batches grow
 * with the commit latency. Each caller's promise settles only when its own batch has committed.
 *
 * `run` gets the items and returns one result per item, in order. If a batch of several fails, each item is run
 * again alone, so one bad item (a constraint it breaks) cannot fail the others.
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
