import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { CLIENT, get, post } from './support/sandbox';
import {
  DEMO_API_KEY,
  OTHER_API_KEY,
  bearer,
  setSettings,
  singleOrder,
  useSandbox,
} from './support/sandbox-orders';
import { setBounded } from '../src/sandbox/sandbox.state';

type Res = Awaited<ReturnType<typeof get>>;

/** The per-account rate limit (spec rewards-service-current.md §5) and hardening of unauthenticated inputs. */
describe('sandbox: rate limit and hardening', () => {
  const sb = useSandbox();

  const rateStats = async () =>
    (await get(sb.baseUrl, '/__control/stats')).body.rate_limit as Record<
      string,
      { admitted: number; rejected_429: number; max_in_any_1s: number }
    >;
  /** `n` requests at once across endpoints: every authenticated /api/v2 request counts. */
  const burst = (n: number, apiKey = DEMO_API_KEY): Promise<Res[]> =>
    Promise.all(
      Array.from({ length: n }, (_v, i) => {
        const path = ['/fields', '/organizations', '/products', '/orders', '/funding_sources'][i % 5];
        return i % 7 === 6
          ? post(sb.baseUrl, '/api/v2/orders', singleOrder(), bearer(apiKey))
          : get(sb.baseUrl, `/api/v2${path}`, bearer(apiKey));
      }),
    );
  const count = (responses: Res[], status: number) => responses.filter((r) => r.status === status).length;

  describe('per-account rate limit', () => {
    it('admits exactly N of 30 concurrent requests and answers the rest 429 with the documented body, no Retry-After', async () => {
      await setSettings(sb.baseUrl, { rate_limit_rps: 10 });
      const responses = await burst(30);
      const admitted = responses.filter((r) => r.status !== 429);
      expect(admitted).toHaveLength(10);
      expect(admitted.every((r) => r.status === 200)).toBe(true);
      const refused = responses.filter((r) => r.status === 429);
      expect(refused).toHaveLength(20);
      for (const r of refused) {
        expect(r.body).toEqual({ error: { message: 'Too many requests', payload: {} } });
        expect(r.headers.get('retry-after')).toBeNull();
      }
      const stats = (await rateStats()).acc_demo;
      expect(stats).toEqual({ admitted: 10, rejected_429: 20, max_in_any_1s: 10 });
      // Refused requests did not reach the handlers: only the admitted orders exist.
      const ordersAdmitted = responses.filter((r, i) => i % 7 === 6 && r.status === 200).length;
      expect((await get(sb.baseUrl, '/__control/orders')).body.total_count).toBe(ordersAdmitted);
    });

    it('is a sliding window: refused requests do not count, and admitted ones age out after a second', async () => {
      await setSettings(sb.baseUrl, { rate_limit_rps: 10 });
      const first = await burst(10);
      const firstDone = Date.now();
      expect(count(first, 200)).toBe(10);
      await sleep(500);
      // Half a second later: still 10 in the last second (a fixed per-second window could admit these).
      expect(count(await burst(5), 429)).toBe(5);
      await sleep(Math.max(0, firstDone + 1100 - Date.now()));
      // 1.1 s after the first ten: admitted again, although the refused five are only ~0.6 s old.
      const later = await burst(10);
      expect(count(later, 200)).toBe(10);
      expect(count(await burst(1), 429)).toBe(1);
      expect((await rateStats()).acc_demo).toEqual({ admitted: 20, rejected_429: 6, max_in_any_1s: 10 });
    });

    it('counts per account and ignores unauthenticated requests', async () => {
      await setSettings(sb.baseUrl, { rate_limit_rps: 5 });
      const [demo, other] = await Promise.all([burst(8), burst(8, OTHER_API_KEY)]);
      expect([count(demo, 429), count(other, 429)]).toEqual([3, 3]);
      const anonymous = await Promise.all(
        Array.from({ length: 10 }, () => get(sb.baseUrl, '/api/v2/fields', bearer('not-a-key'))),
      );
      expect(anonymous.every((r) => r.status === 401)).toBe(true);
      const stats = await rateStats();
      expect(Object.keys(stats).sort()).toEqual(['acc_demo', 'acc_other']);
      expect(stats.acc_other).toEqual({ admitted: 5, rejected_429: 3, max_in_any_1s: 5 });
    });

    it('sends Retry-After only when configured, is off by default, and reset clears the counters', async () => {
      await setSettings(sb.baseUrl, { rate_limit_rps: 2, rate_limit_retry_after: 1 });
      const limited = await burst(3);
      expect(limited.find((r) => r.status === 429)?.headers.get('retry-after')).toBe('1');
      await post(sb.baseUrl, '/__control/reset', {});
      expect(await rateStats()).toEqual({});
      const unlimited = await burst(30);
      expect(count(unlimited, 429)).toBe(0);
      const stats = (await rateStats()).acc_demo;
      expect(stats).toMatchObject({ admitted: 30, rejected_429: 0 });
      expect(stats.max_in_any_1s).toBeGreaterThan(10); // still measured without a limit
      expect((await post(sb.baseUrl, '/__control/settings', { rate_limit_rps: -1 })).status).toBe(400);
      expect((await post(sb.baseUrl, '/__control/settings', { rate_limit_rps: 2.5 })).status).toBe(400);
    });
  });

  describe('token endpoint hardening', () => {
    it('answers 401 invalid_client to malformed percent-encoding in HTTP Basic', async () => {
      for (const credentials of [
        `${CLIENT.clientId}:%E0%A4%A`,
        `%zz:${CLIENT.clientSecret}`,
        'no-colon-at-all',
      ]) {
        const res = await request(sb.baseUrl)
          .post('/oauth/token')
          .set('Authorization', `Basic ${Buffer.from(credentials).toString('base64')}`)
          .type('form')
          .send({ grant_type: 'refresh_token', refresh_token: 'x' });
        expect(res.status).toBe(401);
        expect(res.body.error).toBe('invalid_client');
      }
    });
  });

  describe('maps fed by unauthenticated requests', () => {
    const authorize = () =>
      request(sb.baseUrl)
        .get('/oauth/authorize')
        .query({ client_id: CLIENT.clientId, redirect_uri: CLIENT.redirectUri, response_type: 'code' })
        .expect(200);

    it('sweeps expired consent requests', async () => {
      await authorize();
      await authorize();
      expect(sb.state.pendingConsents.size).toBe(2);
      await post(sb.baseUrl, '/__control/clock/advance', { seconds: 11 * 60 });
      await authorize();
      expect(sb.state.pendingConsents.size).toBe(1);
    });

    it('caps a bounded map, dropping the oldest entries first', () => {
      const map = new Map<string, { expiresAt: number }>();
      for (let i = 0; i < 25; i++) setBounded(map, `k${i}`, { expiresAt: 1_000 }, 0, 0, 10);
      expect([...map.keys()]).toEqual(Array.from({ length: 10 }, (_v, i) => `k${i + 15}`));
      setBounded(map, 'late', { expiresAt: 5_000 }, 2_000, 0, 10); // all others expired at 1 000
      expect([...map.keys()]).toEqual(['late']);
    });
  });
});
