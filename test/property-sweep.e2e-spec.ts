import fc from 'fast-check';
import { rawRequest } from './support/raw-http';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';

/**
 * A property-based sweep over every JSON endpoint: whatever JSON arrives — random values, deep nesting, huge arrays,
 * odd unicode, prototype keys — the answer is a 4xx (or a success) in our error shape with `X-Request-Id`, never a
 * 5xx, and the process stays healthy.
 */
const ENDPOINTS: { method: 'POST' | 'PATCH'; path: string }[] = [
  { method: 'POST', path: '/v1/tenants' },
  { method: 'PATCH', path: '/v1/tenants/sweep' },
  { method: 'POST', path: '/v1/tenants/sweep/api-keys' },
  { method: 'POST', path: '/v1/tenants/sweep/connect-sessions' },
  { method: 'POST', path: '/v1/tenants/sweep/rewards' },
];
const RUNS = 2_000;

const oddString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom(
    '__proto__',
    'constructor',
    'prototype',
    '\u0000',
    '\ud800',
    'a@b.c',
    'http://xn--a',
    'BALANCE',
    'Sales',
    '%E0%A4%A',
    '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  ),
);
/** A JSON text: random values, plus shapes close to real bodies, plus hostile ones built as text. */
const body: fc.Arbitrary<string> = fc.oneof(
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc.dictionary(oddString, fc.jsonValue({ maxDepth: 3 })).map((v) => JSON.stringify(v)),
  fc
    .record(
      {
        rewards: fc.array(
          fc.record(
            {
              recipient: fc.dictionary(oddString, fc.oneof(oddString, fc.jsonValue({ maxDepth: 1 }))),
              value: fc.jsonValue({ maxDepth: 2 }),
              products: fc.jsonValue({ maxDepth: 1 }),
              custom_fields: fc.jsonValue({ maxDepth: 2 }),
            },
            { requiredKeys: [] },
          ),
          { maxLength: 3 },
        ),
        funding_source_id: fc.jsonValue({ maxDepth: 1 }),
        id: oddString,
        name: oddString,
        return_urls: fc.array(oddString, { maxLength: 3 }),
      },
      { requiredKeys: [] },
    )
    .map((v) => JSON.stringify(v)),
  fc.integer({ min: 30, max: 3_000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`),
  fc
    .integer({ min: 1_001, max: 20_000 })
    .map((n) => JSON.stringify({ rewards: Array.from({ length: n }, () => ({})) })),
  fc.constantFrom(
    '{"__proto__":{"x":1}}',
    '{"constructor":{"prototype":{"x":1}}}',
    '{"a":"\\ud800"}',
    '{"a":"\\u0000"}',
    '{',
    'nul',
    '"just a string"',
    '[]',
    '{"rewards":[[{}]]}',
  ),
);

describe('property sweep: random and hostile JSON on every JSON endpoint', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ LOG_LEVEL: 'silent' });
    await control(t, '/reset');
    await createTenant(t, 'sweep');
    await connectTenant(t, 'sweep');
  });
  afterAll(async () => {
    await t.close();
  });

  it(`answers ${RUNS} random bodies with a 4xx in our shape (or a success), never a 5xx`, async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ENDPOINTS), body, async (endpoint, text) => {
        const res = await rawRequest(t.baseUrl, endpoint.method, endpoint.path, text, {
          ...op,
          'Idempotency-Key': `sweep-${n++}`,
        });
        if (res.status >= 500)
          throw new Error(
            `${endpoint.method} ${endpoint.path} ${text.slice(0, 200)} → ${res.status} ${res.text.slice(0, 300)}`,
          );
        expect(res.requestId).toBeTruthy();
        if (res.status >= 400) {
          const parsed = JSON.parse(res.text) as {
            error?: { code?: unknown; message?: unknown; details?: unknown };
          };
          expect(typeof parsed.error?.code).toBe('string');
          expect(typeof parsed.error?.message).toBe('string');
          expect(Array.isArray(parsed.error?.details)).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
    const health = await fetch(`${t.baseUrl}/health/ready`);
    expect(health.status).toBe(200);
  }, 240_000);
});
