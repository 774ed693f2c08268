import type { SchedulerRegistry } from '@nestjs/schedule';

/**
 * Runs `tick` every `ms` without keeping the process alive, registered under `name` with @nestjs/schedule so that the
 * app's shutdown clears it. The background jobs (dispatch worker, approvals, alerts, probes, metrics) all start here.
 */
export function runEvery(
  scheduler: SchedulerRegistry,
  name: string,
  ms: number,
  tick: () => void,
): NodeJS.Timeout {
  const timer = setInterval(tick, ms);
  timer.unref();
  scheduler.addInterval(name, timer);
  return timer;
}

/** `runEvery`, starting at a random moment within `ms` (timer `<name>-start`): instances started together spread out. */
export function runEverySpread(
  scheduler: SchedulerRegistry,
  name: string,
  ms: number,
  tick: () => void,
): void {
  const start = setTimeout(() => runEvery(scheduler, name, ms, tick), Math.random() * ms);
  start.unref();
  scheduler.addTimeout(`${name}-start`, start);
}

/** `work`'s outcome, or a rejection with `message` once `ms` have passed (the work itself is not cancelled). */
export async function withTimeout<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One pass at a time of a background job in this process (the approval and delivery checks): `run` starts a pass
 * unless one is under way or the job is stopped; `stop` (shutdown) refuses new passes and waits for the one under way,
 * so that none outlives the database it uses.
 */
export class OnePass {
  private current: Promise<number> | null = null;
  private stopped = false;

  get isStopped(): boolean {
    return this.stopped;
  }

  run(pass: () => Promise<number>): Promise<number> {
    if (this.current || this.stopped) return Promise.resolve(0);
    const current = pass().finally(() => (this.current = null));
    this.current = current;
    return current;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.current?.catch(() => 0);
  }
}
