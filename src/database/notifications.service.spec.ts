import type { Database } from './database';
import { type Eviction, NotificationsService } from './notifications.service';

/** What the listener hands on: a message from another instance, or null once it was down for a while. */
function received(service: NotificationsService, eviction: Eviction | null): void {
  (service as unknown as { dispatch(eviction: Eviction | null): void }).dispatch(eviction);
}

describe('NotificationsService.evictFrom: a process cache kept in step with the other instances', () => {
  it('drops the entry an eviction of its kind names, and nothing for other kinds', () => {
    const service = new NotificationsService({} as Database);
    const cache = new Map([
      ['t1/live', 1],
      ['t2/live', 2],
    ]);
    service.evictFrom(cache, 'connection', ({ tenant, environment }) => `${tenant}/${environment}`);
    received(service, { kind: 'connection', id: 'c1', tenant: 't1', environment: 'live' });
    received(service, { kind: 'tenant', id: 't2' });
    expect([...cache.keys()]).toEqual(['t2/live']);
  });

  it('drops everything when the listener was down (messages may have been missed)', () => {
    const service = new NotificationsService({} as Database);
    const keys = new Map([['h', 1]]);
    const prefixes = new Map([['p', true]]);
    service.evictFrom(keys, 'api_key', ({ hash }) => hash);
    service.evictFrom(prefixes, 'api_key_prefix', ({ prefix }) => prefix);
    received(service, null);
    expect(keys.size + prefixes.size).toBe(0);
  });
});
