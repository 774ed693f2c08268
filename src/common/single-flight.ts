/**
 * One promise per key at a time in this process: callers that ask while one is under way share it, and it is
 * forgotten once settled (the next caller starts afresh, after a failure too).
 */
export class SingleFlight<T> {
  private readonly running = new Map<string, Promise<T>>();

  run(key: string, work: () => Promise<T>): Promise<T> {
    const running = this.running.get(key);
    if (running) return running;
    const promise = work().finally(() => this.running.delete(key));
    this.running.set(key, promise);
    return promise;
  }
}
