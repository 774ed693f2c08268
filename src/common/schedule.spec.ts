import { SchedulerRegistry } from '@nestjs/schedule';
import { OnePass, runEverySpread } from './schedule';

/** A pass that runs until `finish` is called with how many it checked. */
function held(): { pass: () => Promise<number>; finish: (n: number) => void; started: () => number } {
  let finish: (n: number) => void = () => undefined;
  let started = 0;
  return {
    pass: () => {
      started += 1;
      return new Promise<number>((resolve) => (finish = resolve));
    },
    finish: (n) => finish(n),
    started: () => started,
  };
}

describe('OnePass: one pass of a background job at a time, stopped with the app', () => {
  it('starts no second pass while one is under way, and another once it has ended', async () => {
    const one = new OnePass();
    const job = held();
    const first = one.run(job.pass);
    await expect(one.run(job.pass)).resolves.toBe(0);
    expect(job.started()).toBe(1);
    job.finish(3);
    await expect(first).resolves.toBe(3);
    const second = one.run(job.pass);
    expect(job.started()).toBe(2);
    job.finish(1);
    await expect(second).resolves.toBe(1);
  });

  it('stop() waits for the pass under way and refuses new ones', async () => {
    const one = new OnePass();
    const job = held();
    void one.run(job.pass);
    let stopped = false;
    const stopping = one.stop().then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    expect(one.isStopped).toBe(true);
    expect(stopped).toBe(false); // the pass is still running
    job.finish(2);
    await stopping;
    expect(stopped).toBe(true);
    await expect(one.run(job.pass)).resolves.toBe(0);
    expect(job.started()).toBe(1);
  });

  it('stop() resolves even when the pass under way fails', async () => {
    const one = new OnePass();
    void one.run(() => Promise.reject(new Error('database gone'))).catch(() => undefined);
    await expect(one.stop()).resolves.toBeUndefined();
  });
});

describe('runEverySpread: a job every interval, the first tick at a random moment within it', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('registers the start timeout, then the interval under the name, and ticks every interval', () => {
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    const scheduler = new SchedulerRegistry();
    const tick = jest.fn();
    runEverySpread(scheduler, 'job', 1_000, tick);
    expect(scheduler.doesExist('timeout', 'job-start')).toBe(true);
    expect(scheduler.doesExist('interval', 'job')).toBe(false);
    jest.advanceTimersByTime(500);
    expect(scheduler.doesExist('interval', 'job')).toBe(true);
    expect(tick).not.toHaveBeenCalled();
    jest.advanceTimersByTime(2_000);
    expect(tick).toHaveBeenCalledTimes(2);
    scheduler.deleteInterval('job');
    jest.restoreAllMocks();
  });
});
