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
