import { SingleFlight } from './single-flight';

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('SingleFlight: one promise per key at a time', () => {
  it('shares the running promise between concurrent callers of the same key', async () => {
    const flight = new SingleFlight<string>();
    const gate = deferred<string>();
    const work = jest.fn(() => gate.promise);
    const first = flight.run('a', work);
    const second = flight.run('a', work);
    expect(second).toBe(first);
    gate.resolve('done');
    await expect(Promise.all([first, second])).resolves.toEqual(['done', 'done']);
    expect(work).toHaveBeenCalledTimes(1);
  });

  it('runs different keys independently', async () => {
    const flight = new SingleFlight<string>();
    const a = flight.run('a', () => Promise.resolve('A'));
    const b = flight.run('b', () => Promise.resolve('B'));
    expect(b).not.toBe(a);
    await expect(Promise.all([a, b])).resolves.toEqual(['A', 'B']);
  });

  it('forgets the promise once it settled, after a failure too', async () => {
    const flight = new SingleFlight<string>();
    await expect(flight.run('a', () => Promise.reject(new Error('down')))).rejects.toThrow('down');
    const failedShared = deferred<string>();
    const waiting = flight.run('a', () => failedShared.promise);
    const joined = flight.run('a', () => Promise.resolve('not run'));
    failedShared.reject(new Error('again'));
    await expect(waiting).rejects.toThrow('again');
    await expect(joined).rejects.toThrow('again');
    await expect(flight.run('a', () => Promise.resolve('fresh'))).resolves.toBe('fresh');
  });
});
