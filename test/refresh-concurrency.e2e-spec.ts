import type { ChildProcess } from 'node:child_process';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant } from './support/connect';
import { sqlOn } from './support/database';
import { type CallResult, startTokenWorker, workerEnv, workerRound } from './support/workers';

const PROCESSES = 4;
const CALLERS = 250;
const TTL_S = 2;

/** One round: every process's callers need a token at once; then each process calls the service once with its token. */
async function round(
  workers: ChildProcess[],
  connectionId: string,
): Promise<{ callers: CallResult[]; probes: CallResult[] }> {
  const all = await Promise.all(workers.map((w) => workerRound(w, connectionId, CALLERS)));
  return { callers: all.flatMap((r) => r.callers), probes: all.map((r) => r.probe) };
}

describe('the refresh lock across OS processes', () => {
  let t: TestApp;
  let workers: ChildProcess[] = [];
  let connectionId: string;

  beforeAll(async () => {
    t = await startTestApp();
    await control(t, '/settings', { access_token_ttl_seconds: TTL_S });
    await createTenant(t, 'storm');
    connectionId = await connectTenant(t, 'storm');
    workers = await Promise.all(Array.from({ length: PROCESSES }, () => startTokenWorker(workerEnv(t))));
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) w.send('exit');
    await new Promise((r) => setTimeout(r, 300));
    await t.close();
  });

  async function storm(rounds: number): Promise<{
    results: CallResult[];
    probes: CallResult[];
    refreshes: number;
    revoked: boolean;
    started: number;
  }> {
    const before = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    const grantId = before.grants[before.grants.length - 1].id as string;
    const results: CallResult[] = [];
    const probes: CallResult[] = [];
    const started = Date.now();
    for (let i = 0; i < rounds; i++) {
      await new Promise((r) => setTimeout(r, TTL_S * 1000 + 100)); // the token has expired
      const { callers, probes: calls } = await round(workers, connectionId);
      results.push(...callers);
      probes.push(...calls);
    }
    const after = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    const grant = after.grants.find((g: { id: string }) => g.id === grantId);
    return {
      results,
      probes,
      refreshes: after.refreshes[grantId] - before.refreshes[grantId],
      revoked: grant.revoked,
      started,
    };
  }

  /**
   * One refresh per expiry, whatever the machine's load: every caller was handed a token within its usable window, and
   * the service accepted the vault's token (each process's call after the round); every token minted was handed out
   * (none wasted); and each token was minted only once the token before it had reached its refresh point — none
   * doubled.
   */
  async function expectOneRefreshPerExpiry(
    { results, probes, refreshes, started }: Awaited<ReturnType<typeof storm>>,
    rounds: number,
  ) {
    expect(results).toHaveLength(rounds * PROCESSES * CALLERS);
    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    expect(probes.filter((r) => r.status !== 200)).toEqual([]);
    const handedOut = new Set([...results, ...probes].flatMap((r) => r.tokens));
    expect(refreshes).toBeGreaterThanOrEqual(rounds);
    expect(refreshes).toBe(handedOut.size);
    const refreshed = await sqlOn(
      t.databaseUrl,
      `SELECT (extract(epoch FROM at) * 1000)::float8 AS at_ms, (detail->>'generation')::int AS generation,
              (extract(epoch FROM (detail->>'expires_at')::timestamptz) * 1000)::float8 AS expires_ms
         FROM connection_events WHERE connection_id = $1 AND type IN ('connected', 'token_refreshed')
        ORDER BY (detail->>'generation')::int NULLS FIRST, at`,
      [connectionId],
    );
    const during = refreshed.filter((r) => r.at_ms >= started);
    expect(during).toHaveLength(refreshes);
    for (const r of during) {
      const previous = refreshed[refreshed.indexOf(r) - 1];
      if (previous.expires_ms === null) continue; // the token of the connect itself: long expired when the storm began
      // Minted (created_at, whole seconds) no earlier than the second of the previous token's refresh point: a tenth of
      // its lifetime before it expires (usableUntil). A refresh doubled by two instances would be minted at once.
      const refreshPoint = previous.expires_ms - TTL_S * 100;
      expect(r.expires_ms - TTL_S * 1000).toBeGreaterThanOrEqual(Math.floor(refreshPoint / 1000) * 1000);
    }
  }

  it('refreshes once per expiry when 4 processes × 250 callers need a token at the same time', async () => {
    const outcome = await storm(3);
    expect(outcome.revoked).toBe(false);
    await expectOneRefreshPerExpiry(outcome, 3);
    const connection = await request(t.baseUrl)
      .get('/v1/tenants/storm/connection')
      .set('Authorization', `Bearer ${t.config.operatorApiKey}`)
      .expect(200);
    expect(connection.body).toMatchObject({ status: 'active', consecutive_failures: 0 });
  }, 120_000);

  it('still refreshes once per expiry with latency on the token endpoint', async () => {
    await control(t, '/faults', { route: 'token', latency_ms: 400 });
    const outcome = await storm(2);
    await request(t.baseUrl).delete('/sandbox/__control/faults');
    expect(outcome.revoked).toBe(false);
    await expectOneRefreshPerExpiry(outcome, 2);
  }, 120_000);
});
