import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, createTenant, op } from './support/connect';
import { sqlOn } from './support/database';
import { reward, send, waitFor } from './support/send';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

/**
 * The bound, and the account's pace: slots 550 ms apart ((1000 + 100) / 2), so at most four slots (0, 550, 1100,
 * 1650 ms) fit the bound and the other four of eight sends lie past it. A busy machine may push a send that would fit
 * past the bound (its wait counts from its arrival), never the other way.
 */
const MAX_WAIT_MS = 2_000;
const RPS = 2;
const SENDS = 8;
const FIT = 4;

/**
 * Bounded interactive waits (issue 24), in one process: a send whose account's slot lies further out than
 * DISPATCH_INTERACTIVE_MAX_WAIT_MS, counted from its arrival, is stored and answered 202 `queued` at once; the workers
 * send it at the account's pace. The reliability suite runs the same rule at scale (burst-while-tokens-expire).
 */
describe(`bounded interactive waits (${RPS} requests/s per account, DISPATCH_INTERACTIVE_MAX_WAIT_MS=${MAX_WAIT_MS})`, () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({
      REWARDS_SANDBOX_RATE_LIMIT_RPS: String(RPS),
      DISPATCH_INTERACTIVE_MAX_WAIT_MS: String(MAX_WAIT_MS),
      DISPATCH_POLL_MS: '100',
    });
    await createTenant(t, 'paced');
    await connectTenant(t, 'paced');
    // The connect flow's own calls took the account's first slots: start from an idle account.
    await new Promise((r) => setTimeout(r, MAX_WAIT_MS));
  });
  afterAll(() => t.close());

  it('answers the sends past the bound 202 queued at once, the others 201 within it; the workers send every one exactly once', async () => {
    const answers = await Promise.all(
      Array.from({ length: SENDS }, async (_, i) => {
        const started = Date.now();
        const res = await send(t, 'paced', `wait-${i}`, {
          rewards: [reward({ recipient: { name: `W ${i}`, email: `w${i}@example.com` } })],
        });
        return {
          key: `wait-${i}`,
          status: res.status,
          body: res.body as Json,
          headers: res.headers,
          ms: Date.now() - started,
        };
      }),
    );
    const sent = answers.filter((a) => a.status === 201);
    const queued = answers.filter((a) => a.status === 202);
    expect(sent.length).toBeGreaterThanOrEqual(1);
    expect(sent.length).toBeLessThanOrEqual(FIT);
    expect(queued).toHaveLength(SENDS - sent.length);
    for (const a of sent) {
      expect(a.body.status).toBe('sent');
      expect(a.ms).toBeLessThan(MAX_WAIT_MS + 2_000); // its slot within the bound, then the call and the write
    }
    for (const a of queued) {
      expect(a.body.status).toBe('queued');
      expect(a.headers.location).toBe(`/v1/tenants/paced/dispatches/${a.body.id}`);
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(a.body.progress).toMatchObject({ total: 1, settled: 0 });
      expect(Date.parse(a.body.progress.estimated_completion_at)).toBeGreaterThan(Date.now());
      // Answered without waiting for a slot: well inside the bound.
      expect(a.ms).toBeLessThan(MAX_WAIT_MS);
    }

    // A replay of a queued send's key answers its current state: the same dispatch.
    const replay = await send(t, 'paced', queued[0].key, {
      rewards: [
        reward({
          recipient: { name: `W ${queued[0].key.slice(5)}`, email: `w${queued[0].key.slice(5)}@example.com` },
        }),
      ],
    });
    expect([201, 202]).toContain(replay.status);
    expect(replay.body.id).toBe(queued[0].body.id);
    expect(replay.headers['idempotent-replayed']).toBe('true');

    // The workers send the queued ones at the account's pace: all end sent, each exactly once upstream.
    await waitFor(
      () => sqlOn(t.databaseUrl, `SELECT count(*)::int AS n FROM reward_dispatches WHERE status = 'sent'`),
      (rows) => rows[0].n === SENDS,
      SENDS * 1_000 + 5_000,
    );
    const orders = (await request(t.baseUrl).get('/sandbox/__control/orders').set(op).expect(200)).body
      .orders as Json[];
    const ids = answers.map((a) => `${a.body.id}-r0`).sort();
    expect(
      orders
        .map((o) => o.external_id as string)
        .filter((id) => ids.includes(id))
        .sort(),
    ).toEqual(ids);
    expect(orders).toHaveLength(SENDS);
  });
});
