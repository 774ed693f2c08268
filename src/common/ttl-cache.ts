import type { Clock } from './clock';

/**
 * A bounded in-memory map whose entries expire by the injected clock: the oldest entry goes first when it is full.
 * The process's accelerators (tenants, live connections, custom fields, webhook keys) keep their copies in one.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly max: number,
  ) {}

  /** The entry (a wrapper, so that a cached `null` is told apart from a miss), or undefined once it expired. */
  get(key: string): { value: V } | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    if (hit.until > this.clock.now()) return { value: hit.value };
    this.entries.delete(key);
    return undefined;
  }

  /** The entry's value, else what `load` answers, then kept for `ttlMs` (a failed load keeps nothing). */
  async getOrLoad(key: string, ttlMs: number, load: () => Promise<V>): Promise<V> {
    const hit = this.get(key);
    if (hit) return hit.value;
    const value = await load();
    this.set(key, value, ttlMs);
    return value;
  }

  set(key: string, value: V, ttlMs: number): void {
    this.entries.delete(key);
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, { value, until: this.clock.now() + ttlMs });
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
