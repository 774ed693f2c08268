import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { AuditLog } from '../src/audit/audit-log.service';
import { AuditStore } from '../src/audit/audit.store';
import { Database } from '../src/database/database';
import type { TestApp } from './support/app';
import { OPERATOR_KEY, startTestApp } from './support/app';
import { OffsetClock } from './support/clock';
import { RETURN_URL, approve, control, op } from './support/connect';
import { sqlOn } from './support/database';
import { runSrc } from './support/main-process';
import { reward, waitFor } from './support/send';

type Row = Record<string, unknown>;
const DAY_MS = 24 * 3_600_000;

/**
 * The audit trail through real HTTP and Postgres: each audited action leaves exactly one record with the right actor,
 * client address and request id — the API with each kind of key, the browser-less connect callback, the dashboard's
 * buttons and the CLI; the listings; append-only in the database; retention.
 */
describe('audit trail', () => {
  let t: TestApp;
  const clock = new OffsetClock();
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
  /** Every secret this test handles: none may appear in a record. */
  const secrets: string[] = [OPERATOR_KEY];
  let admin: { id: string; key: string };
  let sender: { id: string; key: string };
  let opsKey: { id: string; key: string };
  let connectionId: string;

  const records = async (action: string): Promise<Row[]> =>
    sql(`SELECT * FROM audit_events WHERE action = $1 ORDER BY id`, [action]);
  /** The one record of `action` since `afterId`; fails when there are none or several. */
  const oneRecord = async (action: string, afterId = 0): Promise<Row> => {
    const rows = (await records(action)).filter((r) => Number(r.id) > afterId);
    expect({ action, count: rows.length }).toEqual({ action, count: 1 });
    return rows[0];
  };
  const lastId = async () => Number((await sql(`SELECT coalesce(max(id), 0) AS id FROM audit_events`))[0].id);
  const cli = (args: string[]) =>
    runSrc(
      'cli.ts',
      {
        DATABASE_URL: t.databaseUrl,
        VAULT_KEYS: vaultKeysOf(t),
        OPERATOR_API_KEY: OPERATOR_KEY,
        DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-audit-cli-')),
      },
      args,
    );

  /** A browser's connect walk, the connect session created with `auth`; the callback carries `callbackRequestId`. */
  async function connect(auth: Record<string, string>, callbackRequestId: string): Promise<string> {
    const session = await request(t.baseUrl)
      .post('/v1/tenants/audited/connect-sessions')
      .set(auth)
      .send({ return_url: RETURN_URL })
      .expect(201);
    const authorize = await request(t.baseUrl)
      .get(`${new URL(session.body.connect_url as string).pathname}/authorize`)
      .expect(302);
    const cookie = (authorize.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
    const callback = await approve(t, new URL(authorize.headers.location));
    const done = await request(t.baseUrl)
      .get(callback)
      .set('Cookie', cookie)
      .set('X-Request-Id', callbackRequestId)
      .expect(302);
    expect(done.headers.location).toContain('status=connected');
    return session.body.id as string;
  }

  beforeAll(async () => {
    t = await startTestApp(
      { OPS_PROBE_INTERVAL_MS: '0', DISPATCH_RETRY_BASE_MS: '600000', DISPATCH_RETRY_MAX_MS: '600000' },
      { clock },
    );
    await control(t, '/reset');
  });
  afterAll(async () => {
    await t.close();
  });

  it('records the tenant created and changed, with the operator key, the client address and the request id', async () => {
    await request(t.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .set('X-Request-Id', 'req-tenant-create')
      .send({
        id: 'audited',
        name: 'Audited',
        return_urls: [RETURN_URL],
        default_funding_source_id: 'FSDEMOMAIN',
      })
      .expect(201);
    const created = await oneRecord('tenant.created');
    expect(created).toMatchObject({
      tenant_id: 'audited',
      actor_type: 'operator_env_key',
      actor_id: null,
      via: 'api',
      request_id: 'req-tenant-create',
      target_type: 'tenant',
      target_id: 'audited',
      details: { name: 'Audited' },
    });
    expect(created.client_address).toMatch(/127\.0\.0\.1$/);
    // A refused duplicate changes nothing and records nothing.
    await request(t.baseUrl).post('/v1/tenants').set(op).send({ id: 'audited', name: 'Again' }).expect(409);
    expect(await records('tenant.created')).toHaveLength(1);

    // An operator key made by the CLI: recorded as the CLI's; then its own changes carry its id and name.
    const made = cli(['operator-key:create', '--name', 'ops-team']);
    expect(await made.exited).toBe(0);
    const plaintext = /\n(rgo_\S+)\n/.exec(made.output())?.[1] as string;
    secrets.push(plaintext);
    const byCli = await oneRecord('api_key.created');
    expect(byCli).toMatchObject({
      tenant_id: null,
      actor_type: 'cli',
      via: 'cli',
      target_type: 'api_key',
      details: { name: 'ops-team', operator: true },
    });
    opsKey = { id: byCli.target_id as string, key: plaintext };
    await request(t.baseUrl)
      .patch('/v1/tenants/audited')
      .set(bearer(opsKey.key))
      .send({ name: 'Audited Inc', default_funding_source_id: 'FSDEMOMAIN' })
      .expect(200);
    expect(await oneRecord('tenant.updated')).toMatchObject({
      tenant_id: 'audited',
      actor_type: 'operator_key',
      actor_id: opsKey.id,
      actor_name: 'ops-team',
      details: { changed: ['name', 'default_funding_source_id'] },
    });
  });

  it('records keys created, rotated and revoked, never the key', async () => {
    const before = await lastId();
    admin = (
      await request(t.baseUrl)
        .post('/v1/tenants/audited/api-keys')
        .set(op)
        .send({ name: 'platform-admin', scopes: ['connection:manage', 'webhooks:manage'] })
        .expect(201)
    ).body;
    sender = (
      await request(t.baseUrl)
        .post('/v1/tenants/audited/api-keys')
        .set(op)
        .send({ name: 'payroll', scopes: ['rewards:send', 'rewards:read'] })
        .expect(201)
    ).body;
    const spare = (
      await request(t.baseUrl)
        .post('/v1/tenants/audited/api-keys')
        .set(op)
        .send({ name: 'spare' })
        .expect(201)
    ).body as { id: string; key: string };
    secrets.push(admin.key, sender.key, spare.key);
    const created = (await records('api_key.created')).filter((r) => Number(r.id) > before);
    expect(created.map((r) => [r.target_id, r.actor_type, r.details])).toEqual([
      [
        admin.id,
        'operator_env_key',
        { name: 'platform-admin', scopes: ['connection:manage', 'webhooks:manage'] },
      ],
      [sender.id, 'operator_env_key', { name: 'payroll', scopes: ['rewards:send', 'rewards:read'] }],
      [
        spare.id,
        'operator_env_key',
        { name: 'spare', scopes: ['rewards:send', 'rewards:read', 'connection:manage', 'webhooks:manage'] },
      ],
    ]);

    const rotated = await request(t.baseUrl)
      .post(`/v1/tenants/audited/api-keys/${spare.id}/rotate`)
      .set(bearer(opsKey.key))
      .send({ grace_period_seconds: 60 })
      .expect(201);
    secrets.push(rotated.body.key as string);
    expect(await oneRecord('api_key.rotated')).toMatchObject({
      tenant_id: 'audited',
      actor_type: 'operator_key',
      actor_id: opsKey.id,
      target_type: 'api_key',
      target_id: spare.id,
      details: {
        name: 'spare',
        successor_id: rotated.body.id,
        grace_period_seconds: 60,
        expires_at: rotated.body.previous_key.expires_at,
      },
    });
    // The successor is the rotation's, not a separate creation.
    expect((await records('api_key.created')).filter((r) => Number(r.id) > before)).toHaveLength(3);

    await request(t.baseUrl).delete(`/v1/tenants/audited/api-keys/${spare.id}`).set(op).expect(204);
    await request(t.baseUrl).delete(`/v1/tenants/audited/api-keys/${spare.id}`).set(op).expect(404);
    expect(await oneRecord('api_key.revoked')).toMatchObject({
      tenant_id: 'audited',
      actor_type: 'operator_env_key',
      target_id: spare.id,
      details: { name: 'spare' },
    });
  });

  it('records the connect session (its key), the browser-less callback (the connect link), re-consent and disconnect', async () => {
    const sessionId = await connect(bearer(admin.key), 'req-callback-1');
    expect(await oneRecord('connect_session.created')).toMatchObject({
      tenant_id: 'audited',
      actor_type: 'api_key',
      actor_id: admin.id,
      actor_name: 'platform-admin',
      via: 'api',
      target_type: 'connect_session',
      target_id: sessionId,
      details: { environment: 'sandbox', scopes: ['default'], return_url: RETURN_URL },
    });
    const connected = await oneRecord('connection.connected');
    const connection = await request(t.baseUrl).get('/v1/tenants/audited/connection').set(op).expect(200);
    const firstId = connection.body.id as string;
    expect(connected).toMatchObject({
      tenant_id: 'audited',
      actor_type: 'connect_link',
      actor_id: sessionId,
      actor_name: null,
      via: 'connect',
      request_id: 'req-callback-1',
      target_type: 'connection',
      target_id: firstId,
      details: { environment: 'sandbox', replaced: [] },
    });
    expect(connected.client_address).toMatch(/127\.0\.0\.1$/);

    // Connecting again while connected: a re-consent, replacing the first connection.
    const before = await lastId();
    const second = await connect(op, 'req-callback-2');
    const reconsented = await oneRecord('connection.reconsented');
    connectionId = (await request(t.baseUrl).get('/v1/tenants/audited/connection').set(op).expect(200)).body
      .id;
    expect(reconsented).toMatchObject({
      actor_type: 'connect_link',
      actor_id: second,
      request_id: 'req-callback-2',
      target_id: connectionId,
      details: { replaced: [firstId] },
    });
    expect((await records('connection.connected')).filter((r) => Number(r.id) > before)).toEqual([]);

    await request(t.baseUrl).delete('/v1/tenants/audited/connection').set(bearer(admin.key)).expect(200);
    expect(await oneRecord('connection.disconnected')).toMatchObject({
      actor_type: 'api_key',
      actor_id: admin.id,
      target_id: connectionId,
      details: { environment: 'sandbox' },
    });
    // After a disconnect, connecting is a new connection, not a re-consent.
    const afterDisconnect = await lastId();
    await connect(op, 'req-callback-3');
    connectionId = (await request(t.baseUrl).get('/v1/tenants/audited/connection').set(op).expect(200)).body
      .id;
    const again = (await records('connection.connected')).filter((r) => Number(r.id) > afterDisconnect);
    expect(again.map((r) => r.target_id)).toEqual([connectionId]);
    expect(await records('connection.reconsented')).toHaveLength(1);
  });

  it('records webhook endpoints added, changed and removed, an event replayed, and a dispatch cancelled', async () => {
    const endpoint = await request(t.baseUrl)
      .post('/v1/tenants/audited/webhooks')
      .set(bearer(admin.key))
      .send({ url: 'http://127.0.0.1:9/hooks/rewards?token=receiver-secret', events: ['reward.sent'] })
      .expect(201);
    secrets.push(endpoint.body.secret as string, 'receiver-secret');
    expect(await oneRecord('webhook_endpoint.created')).toMatchObject({
      actor_type: 'api_key',
      actor_id: admin.id,
      target_type: 'webhook_endpoint',
      target_id: endpoint.body.id,
      details: { host: '127.0.0.1:9', events: ['reward.sent'] },
    });
    await request(t.baseUrl)
      .post(`/v1/tenants/audited/webhooks/${endpoint.body.id as string}/enable`)
      .set(bearer(admin.key))
      .expect(200);
    expect(await oneRecord('webhook_endpoint.enabled')).toMatchObject({ target_id: endpoint.body.id });

    // A reward sent queues an event for the endpoint; the tenant replays it.
    await request(t.baseUrl)
      .post('/v1/tenants/audited/rewards')
      .set(bearer(sender.key))
      .set('Idempotency-Key', 'audit-send')
      .send({ rewards: [reward({ recipient: { name: 'Ada Lovelace', email: 'ada.audit@example.com' } })] })
      .expect(201);
    const deliveries = await waitFor(
      async () =>
        (
          await request(t.baseUrl)
            .get(`/v1/tenants/audited/webhooks/${endpoint.body.id as string}/deliveries`)
            .set(bearer(admin.key))
            .expect(200)
        ).body.deliveries as { id: string; type: string }[],
      (list) => list.length > 0,
    );
    await request(t.baseUrl)
      .post(
        `/v1/tenants/audited/webhooks/${endpoint.body.id as string}/deliveries/${deliveries[0].id}/replay`,
      )
      .set(bearer(admin.key))
      .expect(202);
    expect(await oneRecord('webhook_event.replayed')).toMatchObject({
      actor_id: admin.id,
      target_type: 'webhook_event',
      target_id: deliveries[0].id,
      details: { endpoint_id: endpoint.body.id, type: 'reward.sent' },
    });
    await request(t.baseUrl)
      .delete(`/v1/tenants/audited/webhooks/${endpoint.body.id as string}`)
      .set(bearer(admin.key))
      .expect(204);
    expect(await oneRecord('webhook_endpoint.deleted')).toMatchObject({ target_id: endpoint.body.id });

    // A send the service cannot take now is queued (its retry far away); the sender cancels it.
    await control(t, '/faults', { route: 'orders', status: 503, times: 1 });
    const queued = await request(t.baseUrl)
      .post('/v1/tenants/audited/rewards')
      .set(bearer(sender.key))
      .set('Idempotency-Key', 'audit-cancel')
      .send({ rewards: [reward({ recipient: { name: 'Grace Hopper', email: 'grace.audit@example.com' } })] })
      .expect(202);
    await request(t.baseUrl)
      .post(`/v1/tenants/audited/dispatches/${queued.body.id as string}/cancel`)
      .set(bearer(sender.key))
      .expect(200);
    expect(await oneRecord('dispatch.cancelled')).toMatchObject({
      actor_type: 'api_key',
      actor_id: sender.id,
      actor_name: 'payroll',
      target_type: 'dispatch',
      target_id: queued.body.id,
    });
    // Sends themselves are no audit records (each dispatch is its own record).
    expect(await sql(`SELECT action FROM audit_events WHERE actor_id = $1`, [sender.id])).toEqual([
      { action: 'dispatch.cancelled' },
    ]);
  });

  it('records a forced refresh through the API and the dashboard (Basic auth), but not a probe', async () => {
    const before = await lastId();
    await request(t.baseUrl).post(`/v1/ops/connections/${connectionId}/refresh`).set(op).expect(201);
    const page = await request(t.baseUrl).get('/ops').auth('ops', opsKey.key).expect(200);
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(page.text)?.[1] as string;
    await request(t.baseUrl)
      .post(`/ops/connections/${connectionId}/check`)
      .auth('ops', opsKey.key)
      .type('form')
      .send({ csrf })
      .expect(303);
    await request(t.baseUrl)
      .post(`/ops/connections/${connectionId}/refresh`)
      .auth('anyone', opsKey.key)
      .set('X-Request-Id', 'req-dashboard-refresh')
      .type('form')
      .send({ csrf })
      .expect(303);
    await request(t.baseUrl).post(`/v1/ops/connections/${connectionId}/check`).set(op).expect(201);
    const rows = await sql(`SELECT * FROM audit_events WHERE id > $1 ORDER BY id`, [before]);
    expect(rows.map((r) => [r.action, r.actor_type, r.actor_id, r.via, r.request_id ?? null])).toEqual([
      ['connection.refreshed', 'operator_env_key', null, 'api', expect.any(String)],
      ['connection.refreshed', 'operator_key', opsKey.id, 'dashboard', 'req-dashboard-refresh'],
    ]);
    expect(rows[1]).toMatchObject({
      tenant_id: 'audited',
      actor_name: 'ops-team',
      target_type: 'connection',
      target_id: connectionId,
      details: { status: 'active' },
    });
  });

  it('records the vault key rotation run by the CLI', async () => {
    const rotate = cli(['vault:rotate']);
    expect(await rotate.exited).toBe(0);
    const record = await oneRecord('vault.key_rotated');
    // Every encrypted value counted (the grant's two tokens at least), none rewritten: the key is already current.
    expect((record.details as { values: number }).values).toBeGreaterThanOrEqual(2);
    expect(record).toMatchObject({
      tenant_id: null,
      actor_type: 'cli',
      via: 'cli',
      client_address: null,
      target_type: 'vault',
      target_id: 'test1',
      details: { key_id: 'test1', rewritten: 0, canary: 'current' },
    });
  });

  it('holds exactly one record per change made, and no secret, key, token or recipient data', async () => {
    const counts = await sql(
      `SELECT action, count(*)::int AS n FROM audit_events GROUP BY action ORDER BY action`,
    );
    expect(Object.fromEntries(counts.map((r) => [r.action, r.n]))).toEqual({
      'api_key.created': 4,
      'api_key.revoked': 1,
      'api_key.rotated': 1,
      'connect_session.created': 3,
      'connection.connected': 2,
      'connection.disconnected': 1,
      'connection.reconsented': 1,
      'connection.refreshed': 2,
      'dispatch.cancelled': 1,
      'tenant.created': 1,
      'tenant.updated': 1,
      'vault.key_rotated': 1,
      'webhook_endpoint.created': 1,
      'webhook_endpoint.deleted': 1,
      'webhook_endpoint.enabled': 1,
      'webhook_event.replayed': 1,
    });
    const everything = JSON.stringify(await sql(`SELECT * FROM audit_events`));
    const tokens = await sql(`SELECT access_token_enc, refresh_token_enc FROM grants`);
    for (const secret of [
      ...secrets,
      'ada.audit@example.com',
      'grace.audit@example.com',
      'Grace Hopper',
      ...tokens.flatMap((r) => [r.access_token_enc as string, r.refresh_token_enc as string]),
    ])
      expect({ secret: secret.slice(0, 12), found: everything.includes(secret) }).toEqual({
        secret: secret.slice(0, 12),
        found: false,
      });
  });

  describe('listings', () => {
    beforeAll(async () => {
      // Another tenant's records, which `audited` must never see.
      await request(t.baseUrl)
        .post('/v1/tenants')
        .set(op)
        .send({ id: 'audit-other', name: 'Other' })
        .expect(201);
      await request(t.baseUrl)
        .post('/v1/tenants/audit-other/api-keys')
        .set(op)
        .send({ name: 'x' })
        .expect(201);
    });

    it('lists a tenant’s own records newest first, a page at a time, filtered by action', async () => {
      const all = (
        await request(t.baseUrl)
          .get('/v1/tenants/audited/audit-events?limit=200')
          .set(bearer(admin.key))
          .expect(200)
      ).body as { events: Row[]; next_cursor: string | null };
      const mine = await sql(`SELECT id FROM audit_events WHERE tenant_id = 'audited' ORDER BY id DESC`);
      expect(all.events.map((e) => e.id)).toEqual(mine.map((r) => r.id));
      expect(all.next_cursor).toBeNull();
      expect(all.events.every((e) => e.tenant_id === 'audited')).toBe(true);
      expect(all.events.find((e) => e.action === 'connection.connected')).toMatchObject({
        actor: { type: 'connect_link', name: null, via: 'connect' },
        target: { type: 'connection' },
        request_id: 'req-callback-3',
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });

      const paged: unknown[] = [];
      let cursor: string | null = null;
      do {
        const page = await request(t.baseUrl)
          .get('/v1/tenants/audited/audit-events')
          .query(cursor ? { limit: 4, cursor } : { limit: 4 })
          .set(bearer(admin.key))
          .expect(200);
        expect(page.body.events.length).toBeLessThanOrEqual(4);
        paged.push(...(page.body.events as Row[]).map((e) => e.id));
        cursor = page.body.next_cursor as string | null;
      } while (cursor);
      expect(paged).toEqual(all.events.map((e) => e.id));

      const keys = await request(t.baseUrl)
        .get('/v1/tenants/audited/audit-events?action=api_key.created')
        .set(bearer(admin.key))
        .expect(200);
      expect((keys.body.events as Row[]).map((e) => e.target)).toEqual([
        { type: 'api_key', id: expect.any(String) },
        { type: 'api_key', id: sender.id },
        { type: 'api_key', id: admin.id },
      ]);
      // Another tenant's path is 404 for this key, like any other route.
      await request(t.baseUrl).get('/v1/tenants/audit-other/audit-events').set(bearer(admin.key)).expect(404);
    });

    it('lists every record for operators, by tenant and by action; tenant keys are refused', async () => {
      const all = await request(t.baseUrl).get('/v1/ops/audit-events?limit=200').set(op).expect(200);
      const tenants = new Set((all.body.events as Row[]).map((e) => e.tenant_id));
      expect(tenants).toEqual(new Set(['audited', 'audit-other', null]));
      const other = await request(t.baseUrl)
        .get('/v1/ops/audit-events?tenant=audit-other')
        .set(op)
        .expect(200);
      expect((other.body.events as Row[]).map((e) => e.action)).toEqual([
        'api_key.created',
        'tenant.created',
      ]);
      const vault = await request(t.baseUrl)
        .get('/v1/ops/audit-events?action=vault.key_rotated')
        .set(op)
        .expect(200);
      expect(vault.body.events).toHaveLength(1);
      const both = await request(t.baseUrl)
        .get('/v1/ops/audit-events?tenant=audited&action=connection.refreshed&limit=1')
        .set(op)
        .expect(200);
      expect((both.body.events as Row[]).map((e) => e.request_id)).toEqual(['req-dashboard-refresh']);
      const next = await request(t.baseUrl)
        .get('/v1/ops/audit-events')
        .query({ tenant: 'audited', action: 'connection.refreshed', cursor: both.body.next_cursor as string })
        .set(op)
        .expect(200);
      expect(next.body).toMatchObject({ events: [{ actor: { via: 'api' } }], next_cursor: null });
      // A tenant that does not exist (or no longer does) just has no records.
      await request(t.baseUrl)
        .get('/v1/ops/audit-events?tenant=gone')
        .set(op)
        .expect(200, { events: [], next_cursor: null });
      const refused = await request(t.baseUrl).get('/v1/ops/audit-events').set(bearer(admin.key)).expect(403);
      expect(refused.body.error.code).toBe('operator_key_required');
    });

    it('refuses bad query parameters with a 400 naming each', async () => {
      const cases: [string, string][] = [
        ['/v1/tenants/audited/audit-events?action=key.stolen', 'action'],
        ['/v1/tenants/audited/audit-events?cursor=bm90LWFuLWlk', 'cursor'],
        ['/v1/tenants/audited/audit-events?cursor=%20', 'cursor'],
        ['/v1/tenants/audited/audit-events?limit=0', 'limit'],
        ['/v1/tenants/audited/audit-events?limit=ten', 'limit'],
        ['/v1/tenants/audited/audit-events?limit=201', 'limit'],
        ['/v1/tenants/audited/audit-events?tenant=audit-other', 'tenant'],
        ['/v1/ops/audit-events?tenant=Not%20A%20Slug', 'tenant'],
        ['/v1/ops/audit-events?actor=me', 'actor'],
      ];
      for (const [url, field] of cases) {
        const res = await request(t.baseUrl).get(url).set(op);
        expect({
          url,
          status: res.status,
          code: res.body.error?.code,
          fields: res.body.error?.details?.map((d: Row) => d.field),
        }).toEqual({
          url,
          status: 400,
          code: 'validation_failed',
          fields: [field],
        });
      }
    });
  });

  describe('append-only', () => {
    it('refuses UPDATE, DELETE and TRUNCATE in the database itself', async () => {
      await expect(sql(`UPDATE audit_events SET actor_name = 'someone else'`)).rejects.toThrow(
        /append-only: UPDATE refused/,
      );
      await expect(sql(`DELETE FROM audit_events`)).rejects.toThrow(/append-only: DELETE refused/);
      await expect(sql(`TRUNCATE audit_events`)).rejects.toThrow(/append-only: TRUNCATE refused/);
      expect((await sql(`SELECT count(*)::int AS n FROM audit_events`))[0].n).toBeGreaterThan(20);
    });

    it('writes a record in the transaction of its change: a change that rolls back leaves none', async () => {
      const db = t.app.get(Database);
      const audit = t.app.get(AuditLog);
      await expect(
        db.transaction(async (tx) => {
          await tx.query(`INSERT INTO tenants (id, name) VALUES ('ghost', 'Ghost')`);
          await audit.record('tenant.created', { tenantId: 'ghost', details: { name: 'Ghost' } }, tx);
          // A record whose details would carry a secret is refused, and the whole change with it.
          await audit.record('tenant.updated', { tenantId: 'ghost', details: { client_secret: 'x' } }, tx);
        }),
      ).rejects.toThrow(/audit details must not carry client_secret/);
      expect(await sql(`SELECT id FROM tenants WHERE id = 'ghost'`)).toEqual([]);
      expect(await sql(`SELECT id FROM audit_events WHERE tenant_id = 'ghost'`)).toEqual([]);
    });

    it('a record that cannot be written after its change committed is logged, never a failed answer', async () => {
      const audit = t.app.get(AuditLog);
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      const before = await lastId();
      await expect(
        audit.recordCommitted('dispatch.cancelled', { tenantId: 'audited', details: circular }),
      ).resolves.toBeUndefined();
      expect(await lastId()).toBe(before);
      expect(t.logs.join('')).toMatch(/"action":"dispatch.cancelled".*audit record not written/);
    });

    it('retention deletes records older than the given days, oldest first, in bounded batches — nothing else', async () => {
      const store = t.app.get(AuditStore);
      const olderThan400Days = () => new Date(clock.now() - 400 * DAY_MS);
      const total = (await sql(`SELECT count(*)::int AS n FROM audit_events`))[0].n as number;
      expect(await store.purgeOlderThan(olderThan400Days(), 1000)).toBe(0);
      clock.advance(401 * DAY_MS);
      // A change made now (401 days on) stays.
      await request(t.baseUrl)
        .patch('/v1/tenants/audited')
        .set(op)
        .send({ name: 'Audited Later' })
        .expect(200);
      const oldest = (await sql(`SELECT id FROM audit_events ORDER BY id LIMIT 5`)).map((r) => r.id);
      expect(await store.purgeOlderThan(olderThan400Days(), 5)).toBe(5);
      const left = (await sql(`SELECT id FROM audit_events ORDER BY id`)).map((r) => r.id);
      expect(left.some((id) => oldest.includes(id))).toBe(false);
      let purged = 5;
      for (let n = 5; n === 5; purged += n) n = await store.purgeOlderThan(olderThan400Days(), 5);
      expect(purged).toBe(total);
      expect((await sql(`SELECT action FROM audit_events`)).map((r) => r.action)).toEqual(['tenant.updated']);
    });
  });
});

function vaultKeysOf(t: TestApp): string {
  return t.config.vaultKeys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(',');
}
