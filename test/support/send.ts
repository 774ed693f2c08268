import request from 'supertest';
import type { TestApp } from './app';
import { op } from './connect';

export function reward(overrides: Record<string, unknown> = {}) {
  return {
    recipient: { name: 'Ada Lovelace', email: 'ada@example.com' },
    value: { denomination: 25, currency_code: 'USD' },
    products: ['PRODAMAZONUS'],
    custom_fields: { Department: 'Engineering' },
    ...overrides,
  };
}

export function send(t: TestApp, tenant: string, key: string | null, body: Record<string, unknown>) {
  const req = request(t.baseUrl).post(`/v1/tenants/${tenant}/rewards`).set(op);
  if (key !== null) req.set('Idempotency-Key', key);
  return req.send(body);
}

export async function waitFor<T>(
  fn: () => Promise<T>,
  ok: (v: T) => boolean,
  timeoutMs = 20_000,
): Promise<T> {
  const started = Date.now();
  // Checks again soon at first (most conditions hold almost at once), then backs off to a steady pause.
  for (let pause = 10; ; pause = Math.min(100, pause * 2)) {
    const value = await fn();
    if (ok(value)) return value;
    if (Date.now() - started > timeoutMs)
      throw new Error(`condition not met within ${timeoutMs} ms: ${JSON.stringify(value).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, pause));
  }
}
