import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { RETURN_URL, connectTenant, op } from './support/connect';
import { reward, send, waitFor } from './support/send';
import { WebhookReceiver } from './support/webhook-receiver';

/** The one form of every time the API answers with: ISO 8601, UTC, milliseconds. */
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const isTimeKey = (key: string) => key === 'at' || key.endsWith('_at');

/** Every value under a time key (`*_at` or `at`), at any depth, with its path. */
function times(value: unknown, path = '$', out: { path: string; key: string; value: unknown }[] = []) {
  if (Array.isArray(value)) value.forEach((v, i) => times(v, `${path}[${i}]`, out));
  else if (value !== null && typeof value === 'object')
    for (const [key, v] of Object.entries(value)) {
      if (isTimeKey(key) && (v === null || typeof v !== 'object'))
        out.push({ path: `${path}.${key}`, key, value: v });
      else times(v, `${path}.${key}`, out);
    }
  return out;
}

describe('every time in API answers is ISO 8601 UTC', () => {
  let t: TestApp;
  const receiver = new WebhookReceiver();
  /** Route → its JSON answer. */
  const answers = new Map<string, unknown>();
  const get = async (path: string) => {
    const res = await request(t.baseUrl).get(path).set(op).expect(200);
    answers.set(`GET ${path}`, res.body);
    return res.body as Record<string, unknown>;
  };
  const post = async (path: string, body: object | undefined, status: number) => {
    const res = await request(t.baseUrl)
      .post(path)
      .set(op)
      .send(body as object)
      .expect(status);
    answers.set(`POST ${path}`, res.body);
    return res.body as Record<string, unknown>;
  };

  beforeAll(async () => {
    t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_POLL_MS: '100' });
    await receiver.start();

    await post('/v1/tenants', { id: 'clock', name: 'Clock Co', return_urls: [RETURN_URL] }, 201);
    const key = await post('/v1/tenants/clock/api-keys', { name: 'svc' }, 201);
    // A use of the tenant key, so that its last_used_at is set.
    await request(t.baseUrl)
      .get('/v1/tenants/clock')
      .set('Authorization', `Bearer ${key.key as string}`)
      .expect(200);
    await post('/v1/tenants/clock/connect-sessions', { return_url: RETURN_URL }, 201);
    const connectionId = await connectTenant(t, 'clock');
    const hook = await post(
      '/v1/tenants/clock/webhooks',
      { url: receiver.url('/hooks'), events: ['reward.sent', 'dispatch.completed'] },
      201,
    );
    const sent = await send(t, 'clock', 'clock-1', { rewards: [reward()] }).expect(201);
    answers.set('POST /v1/tenants/clock/rewards', sent.body);
    const batch = await send(t, 'clock', 'clock-2', { rewards: [reward(), reward()] })
      .set('Prefer', 'respond-async')
      .expect(202);
    answers.set('POST /v1/tenants/clock/rewards (async)', batch.body);
    await waitFor(
      () => get(`/v1/tenants/clock/dispatches/${batch.body.id as string}`),
      (d) => d.status === 'sent',
    );
    await waitFor(
      () => get(`/v1/tenants/clock/webhooks/${hook.id as string}/deliveries`),
      (d) => (d.deliveries as { status: string }[]).some((x) => x.status === 'delivered'),
    );
    await post(`/v1/ops/connections/${connectionId}/check`, undefined, 201);
    await post(`/v1/ops/connections/${connectionId}/refresh`, undefined, 201);

    await get('/v1/tenants/clock');
    await get('/v1/tenants/clock/api-keys');
    await get('/v1/tenants/clock/connection');
    await get('/v1/tenants/clock/fields');
    await get('/v1/tenants/clock/rewards');
    await get(`/v1/tenants/clock/dispatches/${sent.body.id as string}`);
    await get(`/v1/tenants/clock/dispatches/${batch.body.id as string}/rewards`);
    await get('/v1/tenants/clock/dispatches');
    await get('/v1/ops/connections');
    await get(`/v1/ops/connections/${connectionId}`);
    await get('/v1/tenants/clock/webhooks');
    await get(`/v1/tenants/clock/webhooks/${hook.id as string}`);
    // The key's last use is recorded in the background; the list shows it once written.
    await waitFor(
      () => get('/v1/tenants/clock/api-keys'),
      (keys) => (keys as unknown as { last_used_at: string | null }[]).every((k) => k.last_used_at !== null),
    );
    const ended = await request(t.baseUrl).delete('/v1/tenants/clock/connection').set(op).expect(200);
    answers.set('DELETE /v1/tenants/clock/connection', ended.body);
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  it('answers every *_at and at as a string like 2026-11-23T17:23:05.629Z, or null', () => {
    const bad = [...answers].flatMap(([route, body]) =>
      times(body)
        .filter(({ value }) => value !== null && !(typeof value === 'string' && ISO_UTC.test(value)))
        .map(({ path, value }) => `${route} ${path} = ${JSON.stringify(value)}`),
    );
    expect(bad).toEqual([]);
  });

  it('walked the times of every main route, set ones included', () => {
    for (const route of [
      'GET /v1/tenants/clock',
      'GET /v1/tenants/clock/api-keys',
      'GET /v1/tenants/clock/connection',
      'GET /v1/tenants/clock/fields',
      'GET /v1/tenants/clock/rewards',
      'GET /v1/tenants/clock/dispatches',
      'GET /v1/ops/connections',
      'GET /v1/tenants/clock/webhooks',
    ])
      expect({ route, times: times(answers.get(route)).filter((x) => x.value !== null).length > 0 }).toEqual({
        route,
        times: true,
      });
    const seen = new Set(
      [...answers.values()].flatMap((body) =>
        times(body)
          .filter(({ value }) => typeof value === 'string')
          .map(({ key }) => key),
      ),
    );
    expect([...seen].sort()).toEqual(
      expect.arrayContaining([
        'access_expires_at',
        'at',
        'connected_at',
        'created_at',
        'delivered_at',
        'disconnected_at',
        'expires_at',
        'fetched_at',
        'last_attempt_at',
        'last_refreshed_at',
        'last_success_at',
        'last_used_at',
        'sent_at',
      ]),
    );
  });

  it('turns the rewards service’s own times into the same form (the rewards listing)', () => {
    const listing = answers.get('GET /v1/tenants/clock/rewards') as { rewards: { created_at: string }[] };
    expect(listing.rewards.length).toBeGreaterThan(0);
    for (const r of listing.rewards) {
      expect(r.created_at).toMatch(ISO_UTC);
      expect(Math.abs(Date.parse(r.created_at) - Date.now())).toBeLessThan(120_000);
    }
  });
});
