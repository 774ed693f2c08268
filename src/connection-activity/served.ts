import { AsyncLocalStorage } from 'node:async_hooks';

/** The dispatch (and reward) an upstream request is made for. */
export interface Served {
  readonly dispatchId: string;
  /** The reward's position in the dispatch; null when one order carries several (the `array` shape). */
  readonly rewardPosition: number | null;
}

const storage = new AsyncLocalStorage<Served>();

/**
 * Runs `work` — an upstream call made for a dispatch — so that the activity records of every request it makes say
 * which dispatch and reward they served: its attempts, its retries after a 429 or a 401, and the token refresh a 401
 * starts inside the vault. An async context rather than an argument because that refresh is reached through
 * `TokenSource.withToken` and shared by the calls waiting on it (it is recorded once, for the call that started it);
 * threading ids through the client's methods would still not reach it.
 */
export function serving<T>(served: Served, work: () => Promise<T>): Promise<T> {
  return storage.run(served, work);
}

/** What the current upstream call serves, if anything. */
export function currentlyServed(): Served | undefined {
  return storage.getStore();
}
