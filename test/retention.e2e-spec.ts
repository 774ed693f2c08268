import { Client } from 'pg';
import request from 'supertest';
import { RetentionJob } from '../src/retention/retention';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { OffsetClock } from './support/clock';
import { connectTenant, control, createTenant, op } from './support/connect';
import { sqlOn } from './support/database';
import { reward, send } from './support/send';

const DAY = 24 * 3600_000;
const FS = { funding_source_id: 'FSDEMOMAIN' };

/**
 * Every text, character and JSON column of every table (information_schema), searched for `needle` in any letter case;
 * returns `table.column: rows` for each hit. `sandbox_state` is the emulated rewards service's own copy of its orders
 * (the service keeps its data, the gateway erases its own), so it is left out.
 */
async function traces(url: string, needle: string, except: string[] = []): Promise<string[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const { rows: columns } = await c.query<{ table_name: string; column_name: string }>(
      `SELECT c.table_name, c.column_name FROM information_schema.columns c
         JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
          AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY', 'uuid')
          AND c.table_name <> ALL($1::text[])
        ORDER BY 1, 2`,
      [['sandbox_state', 'typeorm_migrations', ...except]],
    );
    expect(columns.length).toBeGreaterThan(40);
    const hits: string[] = [];
    for (const { table_name, column_name } of columns) {
      const { rows } = await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${table_name}" WHERE strpos(lower("${column_name}"::text), lower($1)) > 0`,
        [needle],
      );
      if (rows[0].n) hits.push(`${table_name}.${column_name}: ${rows[0].n}`);
    }
    return hits;
  } finally {
    await c.end();
  }
}

describe('retention, erasure and tenant offboarding', () => {
  let t: TestApp;
  const clock = new OffsetClock();
  let job: RetentionJob;
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);

  beforeAll(async () => {
    t = await startTestApp(
      { RETENTION_INTERVAL_MS: '3600000', RETENTION_BATCH_SIZE: '50', RETENTION_PAUSE_MS: '200' },
      { clock },
    );
    job = t.app.get(RetentionJob);
    await control(t, '/reset');
    await createTenant(t, 'keep');
    await connectTenant(t, 'keep');
  });
  afterAll(() => t.close());

  describe('retention', () => {
    /** One dispatch (one reward) per status, created `daysAgo` days ago, seeded by SQL. */
    async function seed(prefix: string, daysAgo: number) {
      await sql(
        `INSERT INTO reward_dispatches (id, tenant_id, environment, order_shape, idempotency_key, request_hash, request,
                                        upstream_payload, status, attempts, response_status, reward_count, created_at, updated_at)
         SELECT md5($1 || s)::uuid, 'keep', 'sandbox', 'single', $1 || s, repeat('0', 64),
                '{"external_reference": null, "funding_source_id": "X", "custom_fields": [[{"id": "F", "label": "L", "value": "v"}]]}',
                '{"payment": {"funding_source_id": "X"}}', s, 1, 201, 1,
                now() - $2 * interval '1 day', now() - $2 * interval '1 day'
           FROM unnest(ARRAY['queued', 'sending', 'sent', 'pending_approval', 'partially_failed', 'failed', 'cancelled']) s`,
        [prefix, daysAgo],
      );
      await sql(
        `INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload)
         SELECT id, 0, id || '-r0', CASE status WHEN 'queued' THEN 'pending' WHEN 'partially_failed' THEN 'failed' ELSE status END,
                '{"recipient": {"name": "Old Timer", "email": "old@example.com"}, "value": {"denomination": 5, "currency_code": "USD"},
                  "delivery": {"method": "EMAIL"}, "custom_fields": [{"id": "F", "value": "v"}]}'
           FROM reward_dispatches WHERE idempotency_key LIKE $1 || '%'`,
        [prefix],
      );
    }
    const statuses = async (prefix: string) =>
      (
        await sql(
          `SELECT d.status, d.redacted_at IS NOT NULL AS redacted, r.upstream_payload->'recipient'->>'email' AS email
             FROM reward_dispatches d JOIN dispatch_rewards r ON r.dispatch_id = d.id
            WHERE d.idempotency_key LIKE $1 || '%' ORDER BY d.status`,
          [prefix],
        )
      ).map((r) => `${r.status}${r.redacted ? ' redacted' : ''}${r.email ? '' : ' no-email'}`);

    it('deletes settled dispatches older than DISPATCH_RETENTION_DAYS and keeps open ones; redacts after RECIPIENT_DATA_RETENTION_DAYS', async () => {
      await seed('ancient-', 401);
      await seed('middle-', 120);
      await seed('recent-', 10);
      await job.run();
      // 401 days: the settled ones are gone; queued, sending and pending_approval stay (never redacted while open).
      expect(await statuses('ancient-')).toEqual(['pending_approval', 'queued', 'sending']);
      // 120 days: all kept; the settled ones redacted, the open ones not.
      expect(await statuses('middle-')).toEqual([
        'cancelled redacted no-email',
        'failed redacted no-email',
        'partially_failed redacted no-email',
        'pending_approval',
        'queued',
        'sending',
        'sent redacted no-email',
      ]);
      expect(await statuses('recent-')).toEqual([
        'cancelled',
        'failed',
        'partially_failed',
        'pending_approval',
        'queued',
        'sending',
        'sent',
      ]);
      const [redacted] = await sql(
        `SELECT d.request, r.upstream_payload, d.request_hash FROM reward_dispatches d
           JOIN dispatch_rewards r ON r.dispatch_id = d.id WHERE d.idempotency_key = 'middle-sent'`,
      );
      expect(redacted.upstream_payload).toEqual({
        recipient: { name: null, email: null },
        value: { denomination: 5, currency_code: 'USD' },
        delivery: { method: 'EMAIL' },
        custom_fields: [{ id: 'F', value: null }],
      });
      expect(redacted.request.custom_fields).toEqual([[{ id: 'F', label: 'L', value: null }]]);
      expect(redacted.request_hash).toBe('0'.repeat(64));
      // The clock moves past the recent ones' limits: a week later nothing changes, 81 days later they are redacted.
      clock.advance(7 * DAY);
      await job.run();
      expect(await statuses('recent-')).toContain('sent');
      clock.advance(74 * DAY);
      await job.run();
      expect(await statuses('recent-')).toContain('sent redacted no-email');
      clock.advance(-81 * DAY);
    });

    it('one instance at a time: a pass while another holds the lock does nothing', async () => {
      const other = new Client({ connectionString: t.databaseUrl });
      await other.connect();
      try {
        await other.query(`SELECT pg_advisory_lock(7240153)`);
        expect(await job.run()).toBeNull();
      } finally {
        await other.end();
      }
      expect(await job.run()).not.toBeNull();
    });

    it('a redacted dispatch still answers its Idempotency-Key: same status, ids and amounts, the recipient redacted', async () => {
      const body = {
        ...FS,
        rewards: [
          reward({ recipient: { name: 'Replay Person', email: 'replay@example.com' } }),
          reward({
            recipient: { name: 'Link Person', email: 'link@example.com' },
            delivery: { method: 'LINK' },
            custom_fields: { Department: 'Marketing' },
          }),
        ],
      };
      const first = await send(t, 'keep', 'replay-1', body).expect(201);
      expect(first.body.rewards[1].delivery.link).toEqual(expect.any(String));
      clock.advance(91 * DAY);
      try {
        await job.run();
        const again = await send(t, 'keep', 'replay-1', body).expect(201);
        expect(again.headers['idempotent-replayed'] ?? 'true').toBeTruthy();
        const strip = (view: Record<string, unknown>) => ({
          ...view,
          rewards: (view.rewards as Record<string, unknown>[]).map((r) => ({
            ...r,
            recipient: null,
            custom_fields: null,
            delivery: { ...(r.delivery as object), link: null, state: null, status: null },
          })),
        });
        expect(strip(again.body)).toEqual(strip(first.body));
        expect(again.body.rewards[0].recipient).toEqual({ name: null, email: null });
        expect(again.body.rewards[1].delivery.link).toBeUndefined();
        expect(again.body.rewards[1].custom_fields[0].value).toBeNull();
        expect(await traces(t.databaseUrl, 'replay@example.com')).toEqual([]);
        const [values] = await sql(
          `SELECT count(*)::int AS n FROM reward_dispatches WHERE request::text LIKE '%Marketing%'`,
        );
        expect(values.n).toBe(0);
        // The request hash is kept: another body under the same key is still refused.
        const other = await send(t, 'keep', 'replay-1', { ...body, rewards: [body.rewards[0]] }).expect(422);
        expect(other.body.error.code).toBe('idempotency_key_reused');
      } finally {
        clock.advance(-91 * DAY);
      }
    });
  });

  describe('erasure', () => {
    const erase = (body: unknown, tenant = 'keep') =>
      request(t.baseUrl)
        .post(`/v1/tenants/${tenant}/recipients/erase`)
        .set(op)
        .send(body as object);

    it('refuses a body that does not name exactly one of email and phone', async () => {
      for (const body of [
        {},
        { email: 'a@example.com', phone: '+15550100' },
        { email: 'nope' },
        { name: 'x' },
        [],
      ]) {
        const res = await erase(body).expect(400);
        expect(res.body.error.code).toBe('validation_failed');
        expect(res.body.error.details.length).toBeGreaterThan(0);
      }
    });

    it('redacts one recipient in every dispatch and reward of the tenant, answers the counts, audits without the address', async () => {
      await send(t, 'keep', 'erase-1', {
        ...FS,
        rewards: [
          reward({ recipient: { name: 'Alice Erased', email: 'alice.erased@example.com' } }),
          reward({ recipient: { name: 'Bob Kept', email: 'bob.kept@example.com' } }),
        ],
      }).expect(201);
      await send(t, 'keep', 'erase-2', {
        ...FS,
        rewards: [
          reward({
            recipient: { name: 'Alice Erased', email: 'Alice.Erased@Example.com' },
            custom_fields: { Department: 'Support' },
          }),
        ],
      }).expect(201);
      // The service refuses this spelling of the number, and its error names it: the erasure must reach that too.
      await send(t, 'keep', 'erase-3', {
        ...FS,
        rewards: [
          reward({
            recipient: { name: 'Phone Person', phone: '+1 (555) 010-0199' },
            delivery: { method: 'PHONE' },
          }),
        ],
      }).expect(422);
      const res = await erase({ email: 'ALICE.ERASED@example.com' }).expect(200);
      expect(res.body).toEqual({ dispatches: 2, rewards: 2, outbox_events: 0 });
      expect(await traces(t.databaseUrl, 'alice.erased@example.com')).toEqual([]);
      expect(await traces(t.databaseUrl, 'Alice Erased')).toEqual([]);
      const [request2] = await sql(`SELECT request FROM reward_dispatches WHERE idempotency_key = 'erase-2'`);
      expect(request2.request.custom_fields).toEqual([
        [{ id: 'FLDDEPARTMENT', label: 'Department', value: null }],
      ]);
      // The other recipient of the same dispatch is untouched.
      expect(await traces(t.databaseUrl, 'bob.kept@example.com')).toEqual([
        'dispatch_rewards.upstream_payload: 1',
      ]);
      // Again: nothing left to change.
      expect((await erase({ email: 'alice.erased@example.com' }).expect(200)).body).toEqual({
        dispatches: 0,
        rewards: 0,
        outbox_events: 0,
      });
      const byPhone = await erase({ phone: '+15550100199' }).expect(200);
      expect(byPhone.body).toMatchObject({ dispatches: 1, rewards: 1 });
      expect(await traces(t.databaseUrl, 'Phone Person')).toEqual([]);
      expect(await traces(t.databaseUrl, '010-0199')).toEqual([]);
      const [audit] = await sql(
        `SELECT details::text AS details FROM audit_events WHERE action = 'recipient.erased' ORDER BY id LIMIT 1`,
      );
      expect(JSON.parse(audit.details as string)).toEqual({
        by: 'email',
        dispatches: 2,
        rewards: 2,
        outbox_events: 0,
      });
    });

    it('cancels a reward to that recipient not sent yet', async () => {
      await sql(
        `INSERT INTO reward_dispatches (id, tenant_id, environment, order_shape, idempotency_key, request_hash, request,
                                        upstream_payload, status, attempts, next_attempt_at, reward_count)
         VALUES ('00000000-0000-4000-8000-0000000000e1', 'keep', 'sandbox', 'single', 'erase-queued', repeat('0', 64),
                 '{"external_reference": null, "funding_source_id": "X", "custom_fields": [[]]}',
                 '{"payment": {"funding_source_id": "X"}}', 'queued', 0, now() + interval '1 hour', 1)`,
      );
      await sql(
        `INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload)
         VALUES ('00000000-0000-4000-8000-0000000000e1', 0, 'e1-r0', 'pending',
                 '{"recipient": {"name": "Queued Q", "email": "queued.q@example.com"}, "value": {"denomination": 5, "currency_code": "USD"},
                   "delivery": {"method": "EMAIL"}}')`,
      );
      expect((await erase({ email: 'queued.q@example.com' }).expect(200)).body.rewards).toBe(1);
      const [row] = await sql(`SELECT status, last_error FROM dispatch_rewards WHERE external_id = 'e1-r0'`);
      expect(row.status).toBe('cancelled');
      expect(row.last_error.code).toBe('dispatch_cancelled');
    });

    it('redacts the recipient in events still waiting for delivery, and counts them', async () => {
      // No event type names a recipient today: this one is made up, to prove the statement reaches them.
      await sql(
        `INSERT INTO webhook_endpoints (id, tenant_id, url, events, secret_enc)
         VALUES ('00000000-0000-4000-8000-00000000e0e0', 'keep', 'https://platform.example.com/hooks', '{*}', 'v1:k:x')`,
      );
      await sql(
        `INSERT INTO webhook_outbox (endpoint_id, tenant_id, event_type, payload, next_attempt_at)
         VALUES ('00000000-0000-4000-8000-00000000e0e0', 'keep', 'reward.sent',
                 '{"data": {"note": "for Outbox.Person@example.com"}}', now() + interval '1 day')`,
      );
      expect((await erase({ email: 'outbox.person@example.com' }).expect(200)).body.outbox_events).toBe(1);
      expect(await traces(t.databaseUrl, 'outbox.person@example.com')).toEqual([]);
      await sql(`DELETE FROM webhook_endpoints WHERE id = '00000000-0000-4000-8000-00000000e0e0'`);
    });

    it('needs rewards:send (a read-only key is refused)', async () => {
      const key = await request(t.baseUrl)
        .post('/v1/tenants/keep/api-keys')
        .set(op)
        .send({ name: 'reader', scopes: ['rewards:read'] })
        .expect(201);
      const res = await request(t.baseUrl)
        .post('/v1/tenants/keep/recipients/erase')
        .set('Authorization', `Bearer ${key.body.key as string}`)
        .send({ email: 'x@example.com' })
        .expect(403);
      expect(res.body.error.code).toBe('insufficient_scope');
    });
  });

  describe('tenant offboarding', () => {
    const TENANT = 'offboard-zq7';

    it('refuses a tenant key', async () => {
      await createTenant(t, 'other-zq7');
      const key = await request(t.baseUrl)
        .post('/v1/tenants/other-zq7/api-keys')
        .set(op)
        .send({ name: 'k' })
        .expect(201);
      const res = await request(t.baseUrl)
        .delete('/v1/tenants/other-zq7')
        .set('Authorization', `Bearer ${key.body.key as string}`)
        .expect(403);
      expect(res.body.error.code).toBe('operator_key_required');
    });

    it('removes the tenant at once and its data in the background; sends meanwhile are refused cleanly; no trace is left', async () => {
      await createTenant(t, TENANT);
      const connectionId = await connectTenant(t, TENANT);
      const key = await request(t.baseUrl)
        .post(`/v1/tenants/${TENANT}/api-keys`)
        .set(op)
        .send({ name: 'svc' })
        .expect(201);
      const tenantKey = { Authorization: `Bearer ${key.body.key as string}` };
      await request(t.baseUrl)
        .post(`/v1/tenants/${TENANT}/webhooks`)
        .set(op)
        .send({ url: 'http://127.0.0.1:9/hooks', events: ['*'] })
        .expect(201);
      for (let i = 0; i < 3; i++)
        await send(t, TENANT, `before-${i}`, {
          ...FS,
          rewards: [reward({ recipient: { name: 'Off Boarded', email: 'off@example.com' } })],
        }).expect(201);
      // History enough for several batches.
      await sql(
        `INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, order_shape, idempotency_key, request_hash,
                                        request, upstream_payload, status, attempts, response_status, reward_count, created_at)
         SELECT gen_random_uuid(), $1, $2, 'sandbox', 'single', 'hist-' || g, repeat('0', 64), '{"custom_fields": [[]]}',
                '{"payment": {}}', 'sent', 1, 201, 1, now() - g * interval '1 minute'
           FROM generate_series(1, 400) g`,
        [TENANT, connectionId],
      );
      await sql(
        `INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload)
         SELECT id, 0, id || '-r0', 'sent', '{"recipient": {"name": "Hist", "email": "hist@example.com"}}'
           FROM reward_dispatches WHERE tenant_id = $1 AND idempotency_key LIKE 'hist-%'`,
        [TENANT],
      );

      // Sends racing the deletion: each is answered, never with a server error.
      const racing = Array.from({ length: 8 }, (_, i) =>
        send(t, TENANT, `racing-${i}`, { ...FS, rewards: [reward()] }).then((r) => r.status),
      );
      await request(t.baseUrl).delete(`/v1/tenants/${TENANT}`).set(op).expect(202);
      for (const status of await Promise.all(racing)) expect([201, 202, 404, 409]).toContain(status);

      // Gone at once, while its data is still there.
      expect(
        (await sql(`SELECT count(*)::int AS n FROM reward_dispatches WHERE tenant_id = $1`, [TENANT]))[0].n,
      ).toBeGreaterThan(200);
      const refused = await send(t, TENANT, 'after-1', { ...FS, rewards: [reward()] }).expect(404);
      expect(refused.body.error.code).toBe('tenant_not_found');
      await request(t.baseUrl).get(`/v1/tenants/${TENANT}`).set(op).expect(404);
      await request(t.baseUrl).get(`/v1/tenants/${TENANT}/dispatches`).set(op).expect(404);
      await request(t.baseUrl).delete(`/v1/tenants/${TENANT}`).set(op).expect(404);
      const withKey = await request(t.baseUrl)
        .post(`/v1/tenants/${TENANT}/rewards`)
        .set(tenantKey)
        .set('Idempotency-Key', 'after-2')
        .send({ ...FS, rewards: [reward()] })
        .expect(401);
      expect(withKey.body.error.code).toBe('invalid_api_key');
      const listed = await request(t.baseUrl)
        .get('/v1/ops/connections?status=disconnected')
        .set(op)
        .expect(200);
      expect(JSON.stringify(listed.body)).not.toContain(TENANT);
      const [grants] = await sql(`SELECT count(*)::int AS n FROM grants WHERE connection_id = $1`, [
        connectionId,
      ]);
      expect(grants.n).toBe(0);
      const [audit] = await sql(
        `SELECT count(*)::int AS n FROM audit_events WHERE action = 'tenant.deleted' AND tenant_id = $1`,
        [TENANT],
      );
      expect(audit.n).toBe(1);
      // A send while the background removal runs (batches of 50) is refused the same way.
      const pass = job.run();
      const during = await send(t, TENANT, 'during-1', { ...FS, rewards: [reward()] });
      expect(during.status).toBe(404);
      await pass;
      await job.run();

      // Nothing of the tenant is left but its audit trail (kept for AUDIT_RETENTION_DAYS).
      expect(await traces(t.databaseUrl, TENANT, ['audit_events'])).toEqual([]);
      expect(await traces(t.databaseUrl, connectionId, ['audit_events'])).toEqual([]);
      expect(await traces(t.databaseUrl, 'off@example.com')).toEqual([]);
      // The id is free again.
      await createTenant(t, TENANT);
    });
  });
});
