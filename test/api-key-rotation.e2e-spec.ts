import { randomBytes } from 'node:crypto';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestAppOn } from './support/app';
import { OffsetClock } from './support/clock';
import { op } from './support/connect';
import { createTestDatabase } from './support/database';
import { waitFor } from './support/send';

const HOUR_MS = 3_600_000;

/**
 * Rotation without downtime on two gateway instances (separate apps, key caches, eviction listeners and clocks) on one
 * Postgres. Time is moved on both clocks instead of waiting for a grace period to end.
 */
describe('API key rotation across instances', () => {
  let db: { url: string; drop: () => Promise<void> };
  let a: TestApp;
  let b: TestApp;
  const clocks = { a: new OffsetClock(), b: new OffsetClock() };
  const advance = (ms: number) => {
    clocks.a.advance(ms);
    clocks.b.advance(ms);
  };
  const statusOn = async (t: TestApp, key: string) =>
    (await request(t.baseUrl).get('/v1/tenants/rot').set('Authorization', `Bearer ${key}`)).status;

  async function createKey(name: string, scopes?: string[]): Promise<{ id: string; key: string }> {
    const res = await request(a.baseUrl)
      .post('/v1/tenants/rot/api-keys')
      .set(op)
      .send(scopes ? { name, scopes } : { name })
      .expect(201);
    return res.body as { id: string; key: string };
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    // One vault key for both, as instances of one gateway share it.
    const env = {
      VAULT_KEYS: `rot:${randomBytes(32).toString('base64')}`,
      OPS_PROBE_INTERVAL_MS: '0',
      LOG_LEVEL: 'error',
    };
    a = await startTestAppOn(db.url, env, { clock: clocks.a });
    b = await startTestAppOn(db.url, env, { clock: clocks.b });
    await request(a.baseUrl).post('/v1/tenants').set(op).send({ id: 'rot', name: 'Rotating' }).expect(201);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });

  it('keeps the old key working on every instance until its grace ends, then 401 everywhere; the successor works on', async () => {
    const old = await createKey('payments', ['rewards:read', 'webhooks:manage']);
    // Both instances know (cache) the old key before the rotation.
    expect([await statusOn(a, old.key), await statusOn(b, old.key)]).toEqual([200, 200]);

    const rotated = await request(a.baseUrl)
      .post(`/v1/tenants/rot/api-keys/${old.id}/rotate`)
      .set(op)
      .send({ grace_period_seconds: 3600 })
      .expect(201);
    const successor = rotated.body as Record<string, unknown> & { key: string; id: string };
    expect(successor).toMatchObject({
      name: 'payments',
      scopes: ['rewards:read', 'webhooks:manage'],
      rotated_from: old.id,
      expires_at: null,
      revoked_at: null,
      previous_key: { id: old.id, name: 'payments', revoked_at: null },
    });
    expect(successor.key).toMatch(/^rgk_/);
    expect(successor.key).not.toBe(old.key);
    const expiresAt = Date.parse((successor.previous_key as { expires_at: string }).expires_at);
    expect(Math.abs(expiresAt - (clocks.a.now() + HOUR_MS))).toBeLessThan(5_000);

    // The listing shows both, with the old key's end; never a key.
    const listed = await request(b.baseUrl).get('/v1/tenants/rot/api-keys').set(op).expect(200);
    const byId = new Map((listed.body as { id: string }[]).map((k) => [k.id, k]));
    expect(byId.get(old.id)).toMatchObject({ expires_at: new Date(expiresAt).toISOString() });
    expect(byId.get(successor.id)).toMatchObject({ rotated_from: old.id, expires_at: null });
    expect(JSON.stringify(listed.body)).not.toContain(successor.key);

    // During the grace period both keys work on both instances.
    advance(HOUR_MS - 60_000);
    for (const t of [a, b]) {
      expect(await statusOn(t, old.key)).toBe(200);
      expect(await statusOn(t, successor.key)).toBe(200);
    }

    // The grace period ends: the old key is refused at once on both, cached or not; the successor goes on.
    advance(61_000);
    for (const t of [a, b]) {
      const res = await request(t.baseUrl).get('/v1/tenants/rot').set('Authorization', `Bearer ${old.key}`);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_api_key');
      expect(await statusOn(t, successor.key)).toBe(200);
    }
    // An expired key cannot be rotated (nor a second time).
    const again = await request(b.baseUrl).post(`/v1/tenants/rot/api-keys/${old.id}/rotate`).set(op).send({});
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('api_key_not_found');
  });

  it('refuses an expired key that an instance still holds in its cache (no message needed: the expiry is checked)', async () => {
    const old = await createKey('short-grace');
    const rotated = await request(a.baseUrl)
      .post(`/v1/tenants/rot/api-keys/${old.id}/rotate`)
      .set(op)
      .send({ grace_period_seconds: 5 })
      .expect(201);
    // Both instances cache the old key with its end (the rotation's NOTIFY made them read it again).
    await waitFor(
      () => statusOn(b, old.key),
      (s) => s === 200,
    );
    expect(await statusOn(a, old.key)).toBe(200);
    // 6 s later the cached entries (kept 10 s) are still there, and the key is refused by both.
    advance(6_000);
    expect([await statusOn(a, old.key), await statusOn(b, old.key)]).toEqual([401, 401]);
    expect(await statusOn(b, rotated.body.key as string)).toBe(200);
  });

  it('with a grace of 0 the old key stops on every instance within a second, as a revocation does', async () => {
    const old = await createKey('batch-runner');
    expect([await statusOn(a, old.key), await statusOn(b, old.key)]).toEqual([200, 200]);
    const rotated = await request(b.baseUrl)
      .post(`/v1/tenants/rot/api-keys/${old.id}/rotate`)
      .set(op)
      .send({ grace_period_seconds: 0 })
      .expect(201);
    expect(rotated.body.scopes).toEqual([
      'rewards:send',
      'rewards:read',
      'connection:manage',
      'webhooks:manage',
    ]);
    expect(await statusOn(b, old.key)).toBe(401);
    // A heard of it through NOTIFY: within a second, whatever its 10-second cache says.
    const started = Date.now();
    await waitFor(
      () => statusOn(a, old.key),
      (s) => s === 401,
      1_000,
    );
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await statusOn(a, rotated.body.key as string)).toBe(200);
  });

  it('rotates a key once: a second rotation is 409 naming the successor, and two at once make one successor', async () => {
    const key = await createKey('once');
    const first = await request(a.baseUrl)
      .post(`/v1/tenants/rot/api-keys/${key.id}/rotate`)
      .set(op)
      .send({})
      .expect(201);
    // The default grace period: 24 hours.
    const end = Date.parse(first.body.previous_key.expires_at as string);
    expect(Math.abs(end - (clocks.a.now() + 24 * HOUR_MS))).toBeLessThan(5_000);
    const second = await request(b.baseUrl)
      .post(`/v1/tenants/rot/api-keys/${key.id}/rotate`)
      .set(op)
      .send({})
      .expect(409);
    expect(second.body.error).toMatchObject({
      code: 'api_key_already_rotated',
      details: [{ field: 'keyId', reason: 'already rotated', successor_id: first.body.id }],
    });

    const racing = await createKey('racing');
    const answers = await Promise.all(
      [a, b, a, b].map((t) =>
        request(t.baseUrl).post(`/v1/tenants/rot/api-keys/${racing.id}/rotate`).set(op).send({}),
      ),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    const listed = await request(a.baseUrl).get('/v1/tenants/rot/api-keys').set(op).expect(200);
    expect(
      (listed.body as { rotated_from: string | null }[]).filter((k) => k.rotated_from === racing.id),
    ).toHaveLength(1);
  });

  it('bounds the grace period and checks what it rotates', async () => {
    const key = await createKey('bounded');
    for (const [value, reason] of [
      [604_801, 'grace_period_seconds must not be greater than 604800'],
      [-1, 'grace_period_seconds must not be less than 0'],
      [1.5, 'grace_period_seconds must be a whole number of seconds'],
      ['3600', 'grace_period_seconds must be a whole number of seconds'],
    ] as const) {
      const res = await request(a.baseUrl)
        .post(`/v1/tenants/rot/api-keys/${key.id}/rotate`)
        .set(op)
        .send({ grace_period_seconds: value })
        .expect(400);
      expect(res.body.error.details).toEqual([{ field: 'grace_period_seconds', reason }]);
    }
    // A revoked key, another tenant's key, a key that does not exist: 404.
    await request(a.baseUrl).post('/v1/tenants').set(op).send({ id: 'rot-other', name: 'Other' }).expect(201);
    const foreign = await request(a.baseUrl)
      .post('/v1/tenants/rot-other/api-keys')
      .set(op)
      .send({ name: 'theirs' })
      .expect(201);
    await request(a.baseUrl).delete(`/v1/tenants/rot/api-keys/${key.id}`).set(op).expect(204);
    for (const id of [key.id, foreign.body.id as string, '3f2b8c1e-5d4a-4e7b-9c0d-2a1b3c4d5e6f']) {
      const res = await request(a.baseUrl)
        .post(`/v1/tenants/rot/api-keys/${id}/rotate`)
        .set(op)
        .send({})
        .expect(404);
      expect(res.body.error.code).toBe('api_key_not_found');
    }
    // Operators only.
    const tenantKey = await createKey('tenant-admin');
    const refused = await request(a.baseUrl)
      .post(`/v1/tenants/rot/api-keys/${tenantKey.id}/rotate`)
      .set('Authorization', `Bearer ${tenantKey.key}`)
      .send({})
      .expect(403);
    expect(refused.body.error.code).toBe('operator_key_required');
  });
});
