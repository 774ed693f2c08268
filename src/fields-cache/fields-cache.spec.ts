import { isFresh, SHARED_TTL_MS } from './fields-cache.service';

describe('isFresh: whether the shared copy of the custom fields is served without asking the service', () => {
  it('is fresh for SHARED_TTL_MS after it was fetched, then stale', () => {
    const fetchedAt = new Date(Date.UTC(2030, 0, 1));
    expect(isFresh(fetchedAt, fetchedAt.getTime())).toBe(true);
    expect(isFresh(fetchedAt, fetchedAt.getTime() + SHARED_TTL_MS - 1)).toBe(true);
    expect(isFresh(fetchedAt, fetchedAt.getTime() + SHARED_TTL_MS)).toBe(false);
  });
});
