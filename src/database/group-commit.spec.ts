import { GroupCommit } from './group-commit';

const tick = () => new Promise((r) => setImmediate(r));

describe('GroupCommit', () => {
  it('sends a lone item at once, alone, and batches what arrives while a flight is under way', async () => {
    const batches: number[][] = [];
    let release: () => void = () => undefined;
    const gc = new GroupCommit<number, number>(async (items) => {
      batches.push(items);
      if (batches.length === 1) await new Promise<void>((r) => (release = r));
      return items.map((i) => i * 10);
    });
    const first = gc.submit(1);
    await tick();
    expect(batches).toEqual([[1]]); // no timer: it went immediately
    const rest = [2, 3, 4].map((i) => gc.submit(i));
    await tick();
    expect(batches).toEqual([[1]]); // waiting for the flight
    release();
    expect(await first).toBe(10);
    expect(await Promise.all(rest)).toEqual([20, 30, 40]);
    expect(batches).toEqual([[1], [2, 3, 4]]);
  });

  it('caps a batch at maxBatch', async () => {
    const batches: number[][] = [];
    let release: () => void = () => undefined;
    const gc = new GroupCommit<number, number>(async (items) => {
      batches.push(items);
      if (batches.length === 1) await new Promise<void>((r) => (release = r));
      return items;
    }, 2);
    const all = [gc.submit(0), gc.submit(1), gc.submit(2), gc.submit(3), gc.submit(4)];
    await tick();
    release();
    await Promise.all(all);
    expect(batches).toEqual([[0], [1, 2], [3, 4]]);
  });

  it('isolates a failing item: the others of its batch still succeed', async () => {
    let release: () => void = () => undefined;
    let calls = 0;
    const gc = new GroupCommit<number, number>(async (items) => {
      calls += 1;
      if (calls === 1) await new Promise<void>((r) => (release = r));
      if (items.includes(3)) throw new Error(`bad item in ${items.join(',')}`);
      return items;
    });
    const first = gc.submit(1);
    await tick();
    const outcomes = Promise.allSettled([gc.submit(2), gc.submit(3), gc.submit(4)]);
    release();
    await first;
    const settled = await outcomes;
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toEqual(new Error('bad item in 3'));
  });
});
