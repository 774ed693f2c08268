import { ManualClock } from '../../test/support/clock';
import { TtlCache } from './ttl-cache';

describe('TtlCache: entries that expire by the injected clock', () => {
  it('serves an entry until its time-to-live has passed, then forgets it', () => {
    const clock = new ManualClock();
    const cache = new TtlCache<string>(clock, 10);
    cache.set('a', 'one', 5_000);
    expect(cache.get('a')).toEqual({ value: 'one' });
    clock.advance(4_999);
    expect(cache.get('a')?.value).toBe('one');
    clock.advance(1);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('tells a cached null apart from a miss', () => {
    const cache = new TtlCache<string | null>(new ManualClock(), 10);
    cache.set('unknown', null, 1_000);
    expect(cache.get('unknown')).toEqual({ value: null });
    expect(cache.get('other')).toBeUndefined();
  });

  it('drops the oldest entry when full; setting a key again makes it the newest', () => {
    const cache = new TtlCache<number>(new ManualClock(), 2);
    cache.set('a', 1, 1_000);
    cache.set('b', 2, 1_000);
    cache.set('a', 3, 1_000);
    cache.set('c', 4, 1_000);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')?.value).toBe(3);
    expect(cache.get('c')?.value).toBe(4);
  });

  it('getOrLoad: answers a live entry without loading, else loads and keeps what it loaded', async () => {
    const clock = new ManualClock();
    const cache = new TtlCache<string>(clock, 10);
    const load = jest.fn(() => Promise.resolve('loaded'));
    await expect(cache.getOrLoad('a', 1_000, load)).resolves.toBe('loaded');
    await expect(cache.getOrLoad('a', 1_000, load)).resolves.toBe('loaded');
    expect(load).toHaveBeenCalledTimes(1);
    clock.advance(1_000);
    await expect(cache.getOrLoad('a', 1_000, () => Promise.resolve('again'))).resolves.toBe('again');
    await expect(cache.getOrLoad('b', 1_000, () => Promise.reject(new Error('down')))).rejects.toThrow(
      'down',
    );
    expect(cache.get('b')).toBeUndefined();
  });

  it('forgets on delete and clear', () => {
    const cache = new TtlCache<number>(new ManualClock(), 10);
    cache.set('a', 1, 1_000);
    cache.set('b', 2, 1_000);
    cache.delete('a');
    expect(cache.get('a')).toBeUndefined();
    cache.clear();
    expect(cache.get('b')).toBeUndefined();
  });
});
