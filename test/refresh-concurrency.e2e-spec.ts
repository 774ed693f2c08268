import type { ChildProcess } from 'node:child_process';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant } from './support/connect';
import { type CallResult, startTokenWorker, workerEnv, workerRound } from './support/workers';

const PROCESSES = 4;
const CALLERS = 250;

function round(workers: ChildProcess[], connectionId: string): Promise<CallResult[]> {
  return Promise.all(workers.map((w) => workerRound(w, connectionId, CALLERS))).then((all) => all.flat());
}

describe('the refresh lock across OS processes', () => {
  let t: TestApp;
  let workers: ChildProcess[] = [];
  let connectionId: string;

  beforeAll(async () => {
    t = await startTestApp();
    await control(t, '/settings', { access_token_ttl_seconds: 2 });
    await createTenant(t, 'storm');
    connectionId = await connectTenant(t, 'storm');
    workers = await Promise.all(Array.from({ length: PROCESSES }, () => startTokenWorker(workerEnv(t))));
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) w.send('exit');
    await new Promise((r) => setTimeout(r, 300));
    await t.close();
  });

  async function storm(
    rounds: number,
  ): Promise<{ results: CallResult[]; refreshes: number; revoked: boolean }> {
    const before = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    const grantId = before.grants[before.grants.length - 1].id as string;
    const results: CallResult[] = [];
    for (let i = 0; i < rounds; i++) {
      await new Promise((r) => setTimeout(r, 2_100)); // the 2-second token has expired
      results.push(...(await round(workers, connectionId)));
    }
    const after = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    const grant = after.grants.find((g: { id: string }) => g.id === grantId);
    return {
      results,
      refreshes: after.refreshes[grantId] - before.refreshes[grantId],
      revoked: grant.revoked,
    };
  }

  function expectOneRefreshPerExpiry(results: CallResult[], refreshes: number, rounds: number) {
    expect(results).toHaveLength(rounds * PROCESSES * CALLERS);
    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    // Every refresh minted exactly one token, and the callers saw each of them: no refresh was wasted or doubled.
    const tokens = new Set(results.map((r) => r.token));
    expect(refreshes).toBeGreaterThanOrEqual(rounds);
    expect(refreshes).toBe(tokens.size);
  }

  it('refreshes once per expiry when 4 processes × 250 callers need a token at the same time', async () => {
    const { results, refreshes, revoked } = await storm(3);
    expect(revoked).toBe(false);
    expectOneRefreshPerExpiry(results, refreshes, 3);
    const connection = await request(t.baseUrl)
      .get('/v1/tenants/storm/connection')
      .set('Authorization', `Bearer ${t.config.operatorApiKey}`)
      .expect(200);
    expect(connection.body).toMatchObject({ status: 'active', consecutive_failures: 0 });
  }, 120_000);

  it('still refreshes once per expiry with latency on the token endpoint', async () => {
    await control(t, '/faults', { route: 'token', latency_ms: 400 });
    const { results, refreshes, revoked } = await storm(2);
    await request(t.baseUrl).delete('/sandbox/__control/faults');
    expect(revoked).toBe(false);
    expectOneRefreshPerExpiry(results, refreshes, 2);
  }, 120_000);
});
