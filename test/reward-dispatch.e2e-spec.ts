import { Client } from 'pg';
import request from 'supertest';
import { FieldsCacheService } from '../src/fields-cache/fields-cache.service';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward, send, waitFor } from './support/send';

const FS = { funding_source_id: 'FSDEMOMAIN' };
const UPSTREAM_ID = /^[A-Z0-9]{12}$/;

/** Every test runs against both upstream order shapes: the current service (`single`) and the older `array` form. */
describe.each(['single', 'array'] as const)(
  'reward dispatch (%s order shape): send with custom fields, exactly once',
  (shape) => {
    let t: TestApp;
    let connectionId: string;
    const orders = async () =>
      (await request(t.baseUrl).get('/sandbox/__control/orders')).body.orders as {
        id: string;
        external_id: string;
        recipients: string[];
      }[];
    /** The external_id of a dispatch's reward upstream: its own in `single`, the dispatch's in `array`. */
    const externalId = (dispatchId: string, position = 0) =>
      shape === 'single' ? `${dispatchId}-r${position}` : dispatchId;
    /** Where the service's error payload points for reward 0's field. */
    const payloadPath = (field: string) => (shape === 'single' ? `reward.${field}` : `rewards[0].${field}`);

    beforeAll(async () => {
      t = await startTestApp({
        DISPATCH_RETRY_BASE_MS: '100',
        DISPATCH_POLL_MS: '100',
        DISPATCH_UPSTREAM_TIMEOUT_MS: '1000',
        DISPATCH_LEASE_MS: '3000',
        REWARDS_SANDBOX_ORDER_SHAPE: shape,
      });
      await control(t, '/reset');
      await createTenant(t, 'shop');
      connectionId = await connectTenant(t, 'shop');
    });
    afterAll(async () => {
      await t.close();
    });
    afterEach(async () => {
      await request(t.baseUrl).delete('/sandbox/__control/faults');
    });

    it('sends one reward with custom fields by label: 201, upstream ids, labels, its external_id', async () => {
      const res = await send(t, 'shop', 'one-1', {
        ...FS,
        external_reference: 'ref-1',
        rewards: [reward({ custom_fields: { Department: 'Sales', Region: 'EMEA' } })],
      }).expect(201);
      expect(res.body).toMatchObject({
        status: 'sent',
        order_shape: shape,
        attempts: 1,
        external_reference: 'ref-1',
        upstream_order_id: expect.stringMatching(UPSTREAM_ID),
        counts: { sent: 1 },
      });
      expect(res.body.rewards[0]).toMatchObject({
        status: 'sent',
        external_id: externalId(res.body.id),
        upstream_order_id: res.body.upstream_order_id,
        upstream_order_status: 'EXECUTED',
        id: expect.stringMatching(UPSTREAM_ID),
        custom_fields: [
          { id: 'FLDDEPARTMENT', label: 'Department', value: 'Sales' },
          { id: 'FLDREGION', label: 'Region', value: 'EMEA' },
        ],
      });
      expect((await orders()).find((o) => o.id === res.body.upstream_order_id)?.external_id).toBe(
        externalId(res.body.id),
      );
      const read = await request(t.baseUrl)
        .get(`/v1/tenants/shop/dispatches/${res.body.id}`)
        .set(op)
        .expect(200);
      expect(read.body).toEqual(res.body);
    });

    it(`sends many rewards as ${shape === 'single' ? 'one order each, each with its own external_id' : 'one order'}, custom fields by id`, async () => {
      const rewards = [0, 1, 2].map((i) =>
        reward({
          recipient: { name: `R${i}`, email: `many${i}@example.com` },
          custom_fields: [
            { id: 'FLDDEPARTMENT', value: 'Support' },
            { label: 'Campaign', value: 'Referral' },
          ],
        }),
      );
      const res = await send(t, 'shop', 'many-1', { ...FS, rewards }).expect(201);
      expect(res.body.rewards).toHaveLength(3);
      expect(new Set(res.body.rewards.map((r: { id: string }) => r.id)).size).toBe(3);
      const upstream = (await orders()).filter((o) => o.recipients.some((e) => e.startsWith('many')));
      expect(upstream).toHaveLength(shape === 'single' ? 3 : 1);
      expect(
        new Set(res.body.rewards.map((r: { upstream_order_id: string }) => r.upstream_order_id)).size,
      ).toBe(upstream.length);
      expect(new Set(upstream.map((o) => o.external_id))).toEqual(
        new Set([0, 1, 2].map((i) => externalId(res.body.id, i))),
      );
      expect(res.body.rewards[2].custom_fields).toEqual([
        { id: 'FLDDEPARTMENT', label: 'Department', value: 'Support' },
        { id: 'FLDCAMPAIGN', label: 'Campaign', value: 'Referral' },
      ]);
    });

    it('funds from BALANCE unless the request or the tenant names a source', async () => {
      const none = await send(t, 'shop', 'fs-1', { rewards: [reward()] }).expect(201);
      expect(none.body.funding_source_id).toBe('BALANCE');
      await send(t, 'shop', 'fs-1b', { funding_source_id: 'balance', rewards: [reward()] }).expect(201);
      await request(t.baseUrl)
        .patch('/v1/tenants/shop')
        .set(op)
        .send({ default_funding_source_id: 'FSDEMOMAIN' })
        .expect(200);
      const tenantDefault = await send(t, 'shop', 'fs-2', { rewards: [reward()] }).expect(201);
      expect(tenantDefault.body.funding_source_id).toBe('FSDEMOMAIN');
    });

    describe('validation before anything goes upstream', () => {
      it('requires the Idempotency-Key header', async () => {
        const res = await send(t, 'shop', null, { ...FS, rewards: [reward()] }).expect(400);
        expect(res.body.error).toMatchObject({
          code: 'idempotency_key_missing',
          details: [{ field: 'Idempotency-Key' }],
        });
        const long = await send(t, 'shop', 'k'.repeat(256), { ...FS, rewards: [reward()] }).expect(400);
        expect(long.body.error.code).toBe('idempotency_key_invalid');
      });

      it('names every bad field of the body', async () => {
        const res = await send(t, 'shop', 'bad-body', {
          ...FS,
          rewards: [
            reward({
              recipient: { name: '', email: 'nope' },
              value: { denomination: -1, currency_code: 'usd' },
              products: [],
            }),
            { nonsense: true },
          ],
          extra: 1,
        }).expect(400);
        const fields = res.body.error.details.map((d: { field: string }) => d.field);
        expect(fields).toEqual(
          expect.arrayContaining([
            'rewards[0].recipient.name',
            'rewards[0].recipient.email',
            'rewards[0].value.denomination',
            'rewards[0].value.currency_code',
            'rewards[0].products',
            'rewards[1].nonsense',
            'rewards[1].recipient',
            'extra',
          ]),
        );
        const empty = await send(t, 'shop', 'bad-body-2', { ...FS, rewards: [] }).expect(400);
        expect(empty.body.error.details[0].field).toBe('rewards');
        const shape = await send(t, 'shop', 'bad-body-3', {
          ...FS,
          rewards: [reward({ custom_fields: 'Sales' })],
        }).expect(400);
        expect(shape.body.error.details[0].field).toBe('rewards[0].custom_fields');
        const nested = await send(t, 'shop', 'bad-body-4', { ...FS, rewards: [[reward()]] }).expect(400);
        expect(nested.body.error.details[0].field).toMatch(/^rewards/);
      });

      it('rejects an unknown label listing the known ones, a value outside the options listing them, a missing required field', async () => {
        const unknown = await send(t, 'shop', 'cf-1', {
          ...FS,
          rewards: [reward({ custom_fields: { Department: 'Sales', Team: 'Red' } })],
        }).expect(422);
        expect(unknown.body.error.code).toBe('unknown_custom_field');
        expect(unknown.body.error.details[0]).toMatchObject({
          field: 'rewards[0].custom_fields.Team',
          known_labels: ['Department', 'Campaign', 'Region'],
        });
        const option = await send(t, 'shop', 'cf-2', {
          ...FS,
          rewards: [reward({ custom_fields: { Department: 'Legal' } })],
        }).expect(422);
        expect(option.body.error).toMatchObject({
          code: 'invalid_custom_field_value',
          details: [{ allowed_values: ['Sales', 'Engineering', 'Support', 'Marketing'] }],
        });
        const missing = await send(t, 'shop', 'cf-3', {
          ...FS,
          rewards: [reward({ custom_fields: { Region: 'EMEA' } })],
        }).expect(422);
        expect(missing.body.error).toMatchObject({
          code: 'missing_required_custom_field',
          details: [{ field: 'rewards[0].custom_fields.Department' }],
        });
        // Nothing was stored for the rejected keys: they can be used again once the request is fixed.
        await send(t, 'shop', 'cf-1', { ...FS, rewards: [reward()] }).expect(201);
      });

      it('picks up a field added upstream since the cache was filled (one forced reload)', async () => {
        const accounts = (await request(t.baseUrl).get('/sandbox/__control/accounts')).body.accounts;
        const demo = accounts.find((a: { id: string }) => a.id === 'acc_demo');
        await request(t.baseUrl)
          .put('/sandbox/__control/accounts/acc_demo/fields')
          .send({
            fields: [
              ...demo.fields,
              { id: 'FLDTEAM', label: 'Team', data: { options: ['Red', 'Blue'] }, required: false },
            ],
          });
        // An earlier test's unknown label used this connection's forced reload: within 30 s another is refused.
        const fieldCalls = async () =>
          (await request(t.baseUrl).get('/sandbox/__control/stats')).body.calls.fields as number;
        const before = await fieldCalls();
        await send(t, 'shop', 'cf-limited', {
          ...FS,
          rewards: [reward({ custom_fields: { Department: 'Sales', Team: 'Red' } })],
        }).expect(422);
        expect(await fieldCalls()).toBe(before);
        const { Client } = await import('pg');
        const db = new Client({ connectionString: t.databaseUrl });
        await db.connect();
        await db.query(`UPDATE fields_cache SET forced_reload_at = now() - interval '31 seconds'`);
        await db.end();
        const res = await send(t, 'shop', 'cf-new', {
          ...FS,
          rewards: [reward({ custom_fields: { Department: 'Sales', Team: 'Red' } })],
        }).expect(201);
        expect(res.body.rewards[0].custom_fields).toContainEqual({
          id: 'FLDTEAM',
          label: 'Team',
          value: 'Red',
        });
        expect(await fieldCalls()).toBe(before + 1);
        await request(t.baseUrl)
          .put('/sandbox/__control/accounts/acc_demo/fields')
          .send({ fields: demo.fields });
        await request(t.baseUrl)
          .delete(`/v1/ops/connections/${connectionId}/fields-cache`)
          .set(op)
          .expect(204);
      });
    });

    describe('idempotency', () => {
      it('replays the stored outcome for the same key and body, refuses another body, and sends once', async () => {
        const body = { ...FS, rewards: [reward({ recipient: { name: 'Once', email: 'once@example.com' } })] };
        const first = await send(t, 'shop', 'idem-1', body).expect(201);
        const again = await send(t, 'shop', 'idem-1', body).expect(201);
        expect(again.body).toEqual(first.body);
        expect(again.headers['idempotent-replayed']).toBe('true');
        const other = await send(t, 'shop', 'idem-1', { ...body, external_reference: 'changed' }).expect(422);
        expect(other.body.error.code).toBe('idempotency_key_reused');
        expect((await orders()).filter((o) => o.external_id === externalId(first.body.id))).toHaveLength(1);
      });

      it('sends one order when the same key arrives 10 times at once', async () => {
        await control(t, '/faults', { route: 'orders', latency_ms: 300, times: 1 });
        const body = { ...FS, rewards: [reward({ recipient: { name: 'Race', email: 'race@example.com' } })] };
        const responses = await Promise.all(
          Array.from({ length: 10 }, () => send(t, 'shop', 'race-1', body)),
        );
        const statuses = responses.map((r) => r.status).sort();
        expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
        expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
        const id = responses.find((r) => r.status === 201)?.body.id;
        expect((await orders()).filter((o) => o.external_id === externalId(id))).toHaveLength(1);
        expect(
          responses
            .filter((r) => r.status === 409)
            .every((r) => r.body.error.code === 'idempotency_request_in_progress'),
        ).toBe(true);
      });

      it('sends the order only once its insert has committed, and not at all when the insert fails', async () => {
        // The order is made ready while the insert is on its way (DispatchSender.run's `stored`): hold inserts back
        // with a lock and nothing may reach the service until the insert is through.
        const db = new Client({ connectionString: t.databaseUrl });
        await db.connect();
        const recipientsUpstream = async () => (await orders()).flatMap((o) => o.recipients);
        try {
          await db.query(`CREATE OR REPLACE FUNCTION rg_test_refuse_insert() RETURNS trigger AS $$
                          BEGIN
                            IF NEW.idempotency_key LIKE 'refused-%' THEN RAISE EXCEPTION 'refused by the test'; END IF;
                            RETURN NEW;
                          END $$ LANGUAGE plpgsql`);
          await db.query(`CREATE TRIGGER rg_test_refuse_insert BEFORE INSERT ON reward_dispatches
                          FOR EACH ROW EXECUTE FUNCTION rg_test_refuse_insert()`);
          for (const [key, email] of [
            ['held-1', 'held@example.com'],
            ['refused-1', 'refused@example.com'],
          ]) {
            await db.query('BEGIN');
            await db.query('LOCK TABLE reward_dispatches IN SHARE MODE');
            const pending = send(t, 'shop', key, {
              ...FS,
              rewards: [reward({ recipient: { name: 'Held', email } })],
            }).then((r) => r);
            await new Promise((r) => setTimeout(r, 400));
            expect(await recipientsUpstream()).not.toContain(email); // built, waiting for the insert
            await db.query('COMMIT');
            const res = await pending;
            if (key === 'held-1') {
              expect(res.status).toBe(201);
              expect(res.body.status).toBe('sent');
              expect((await recipientsUpstream()).filter((r) => r === email)).toHaveLength(1);
            } else {
              expect(res.status).toBe(500);
              expect(res.body.error.code).toBeDefined();
              // Nothing stored, nothing sent: the request can be retried with the same key.
              expect(await recipientsUpstream()).not.toContain(email);
              const rows = await db.query(`SELECT 1 FROM reward_dispatches WHERE idempotency_key = $1`, [
                key,
              ]);
              expect(rows.rowCount).toBe(0);
            }
          }
        } finally {
          await db.query('ROLLBACK').catch(() => undefined);
          await db.query('DROP TRIGGER IF EXISTS rg_test_refuse_insert ON reward_dispatches');
          await db.query('DROP FUNCTION IF EXISTS rg_test_refuse_insert()');
          await db.end();
        }
      });

      it('shares commits between concurrent sends (group commit): 40 sends in fewer statements, each answered with its own stored dispatch', async () => {
        const histogram = async () => {
          const text = (await request(t.baseUrl).get('/metrics').expect(200)).text;
          const num = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? 0);
          return {
            statements: num('rg_dispatch_insert_batch_size_count'),
            dispatches: num('rg_dispatch_insert_batch_size_sum'),
          };
        };
        const before = await histogram();
        // Hold inserts back for a moment (a lock inserts wait for), as a slow commit would: the first insert is then in
        // flight while the others arrive, and they must share statements rather than queue one by one.
        const blocker = new Client({ connectionString: t.databaseUrl });
        await blocker.connect();
        await blocker.query('BEGIN');
        await blocker.query('LOCK TABLE reward_dispatches IN SHARE MODE');
        const pending = Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            send(t, 'shop', `group-${i}`, {
              ...FS,
              rewards: [reward({ recipient: { name: `G${i}`, email: `group${i}@example.com` } })],
            }).then((r) => r),
          ),
        );
        await new Promise((r) => setTimeout(r, 500));
        await blocker.query('COMMIT');
        await blocker.end();
        const responses = await pending;
        // Stored, each: 201 sent, or 202 queued when its order could not go within its bounds (the upstream timeout, the
        // interactive wait), which a machine busy with other tests can cause; what is proven here is the shared insert.
        expect(responses.map((r) => r.status).filter((s) => s !== 201 && s !== 202)).toEqual([]);
        expect(new Set(responses.map((r) => r.body.id)).size).toBe(40);
        const after = await histogram();
        expect(after.dispatches - before.dispatches).toBe(40);
        expect(after.statements - before.statements).toBeLessThanOrEqual(4); // the first alone, then shared ones
        // Each answer is its own dispatch, stored.
        for (const r of responses.slice(0, 5))
          await request(t.baseUrl).get(`/v1/tenants/shop/dispatches/${r.body.id}`).set(op).expect(200);
      });

      it('scopes keys per tenant', async () => {
        await createTenant(t, 'shop-two');
        await connectTenant(t, 'shop-two');
        const body = { ...FS, rewards: [reward()] };
        const a = await send(t, 'shop', 'shared-key', body).expect(201);
        const b = await send(t, 'shop-two', 'shared-key', body).expect(201);
        expect(a.body.id).not.toBe(b.body.id);
      });
    });

    describe('upstream outcomes', () => {
      it('fails with insufficient_funds on a 402, and the dispatch says so', async () => {
        await request(t.baseUrl)
          .post('/sandbox/__control/accounts/acc_demo/funding-sources/FSDEMOSMALL')
          .send({ balance: 5 });
        const res = await send(t, 'shop', 'poor-1', {
          funding_source_id: 'FSDEMOSMALL',
          rewards: [reward()],
        }).expect(422);
        expect(res.body.error).toMatchObject({
          code: 'insufficient_funds',
          details: [{ upstream_status: 402 }],
        });
        const id = res.body.error.details[0].dispatch_id;
        const dispatch = await request(t.baseUrl)
          .get(`/v1/tenants/shop/dispatches/${id}`)
          .set(op)
          .expect(200);
        expect(dispatch.body).toMatchObject({ status: 'failed', last_error: { code: 'insufficient_funds' } });
      });

      it('fails with upstream_rejected on a 400 from the service, with its message and payload', async () => {
        const res = await send(t, 'shop', 'rej-1', {
          ...FS,
          rewards: [reward({ products: ['PRODUNKNOWN'] })],
        }).expect(422);
        expect(res.body.error).toMatchObject({
          code: 'upstream_rejected',
          details: [
            {
              field: 'rewards[0]',
              upstream_status: 400,
              upstream_payload: { [payloadPath('products')]: 'PRODUNKNOWN' },
            },
          ],
        });
      });

      it('queues on a 503 (202), and the worker sends it; a replay then shows it sent', async () => {
        await control(t, '/faults', { route: 'orders', status: 503, times: 1 });
        const body = {
          ...FS,
          rewards: [reward({ recipient: { name: 'Later', email: 'later@example.com' } })],
        };
        const res = await send(t, 'shop', 'later-1', body).expect(202);
        expect(res.body).toMatchObject({
          status: 'queued',
          last_error: { code: 'upstream_unavailable', upstream_status: 503 },
        });
        const sent = await waitFor(
          () => request(t.baseUrl).get(`/v1/tenants/shop/dispatches/${res.body.id}`).set(op),
          (r) => r.body.status === 'sent',
        );
        expect(sent.body.attempts).toBe(2);
        const replay = await send(t, 'shop', 'later-1', body).expect(201);
        expect(replay.body.status).toBe('sent');
        expect((await orders()).filter((o) => o.external_id === externalId(res.body.id))).toHaveLength(1);
      });

      it('honours Retry-After on a 429', async () => {
        await control(t, '/faults', { route: 'orders', status: 429, retry_after: 2, times: 1 });
        const started = Date.now();
        const res = await send(t, 'shop', 'limited-1', { ...FS, rewards: [reward()] }).expect(202);
        expect(new Date(res.body.next_attempt_at).getTime() - started).toBeGreaterThanOrEqual(1_900);
        const sent = await waitFor(
          () => request(t.baseUrl).get(`/v1/tenants/shop/dispatches/${res.body.id}`).set(op),
          (r) => r.body.status === 'sent',
        );
        expect(new Date(sent.body.sent_at).getTime() - started).toBeGreaterThanOrEqual(1_900);
      });

      it('does not send twice when the answer came too late after the order was created', async () => {
        await control(t, '/faults', { route: 'orders', delay_after_work_ms: 2_000, times: 1 });
        const res = await send(t, 'shop', 'late-1', { ...FS, rewards: [reward()] }).expect(202);
        await waitFor(
          () => request(t.baseUrl).get(`/v1/tenants/shop/dispatches/${res.body.id}`).set(op),
          (r) => r.body.status === 'sent',
        );
        expect((await orders()).filter((o) => o.external_id === externalId(res.body.id))).toHaveLength(1);
      });
    });

    it('lists dispatches by status, paged', async () => {
      const page = await request(t.baseUrl)
        .get('/v1/tenants/shop/dispatches?status=sent&limit=2')
        .set(op)
        .expect(200);
      expect(page.body.dispatches).toHaveLength(2);
      expect(page.body.dispatches.every((d: { status: string }) => d.status === 'sent')).toBe(true);
      expect(page.body.next_offset).toBe(2);
      const bad = await request(t.baseUrl)
        .get('/v1/tenants/shop/dispatches?status=lost&limit=1000')
        .set(op)
        .expect(400);
      expect(bad.body.error.details.map((d: { field: string }) => d.field).sort()).toEqual([
        'limit',
        'status',
      ]);
      await request(t.baseUrl)
        .get('/v1/tenants/shop/dispatches/00000000-0000-4000-8000-000000000000')
        .set(op)
        .expect(404);
    });

    it('lists rewards filtered by label; an unknown label is a 422 like sending', async () => {
      await send(t, 'shop', 'filter-1', {
        ...FS,
        rewards: [reward({ custom_fields: { Department: 'Marketing' } })],
      }).expect(201);
      const res = await request(t.baseUrl)
        .get('/v1/tenants/shop/rewards?Department=Marketing')
        .set(op)
        .expect(200);
      expect(res.body.total_count).toBe(1);
      expect(res.body.rewards[0].custom_fields).toContainEqual({
        id: 'FLDDEPARTMENT',
        label: 'Department',
        value: 'Marketing',
      });
      const unknown = await request(t.baseUrl).get('/v1/tenants/shop/rewards?Team=Red').set(op).expect(422);
      expect(unknown.body.error).toMatchObject({
        code: 'unknown_custom_field',
        details: [{ field: 'Team', known_labels: ['Department', 'Campaign', 'Region'] }],
      });
      await request(t.baseUrl).get('/v1/tenants/shop/rewards?limit=500').set(op).expect(400);
    });

    it('serves the fields with fetched_at, and a stale copy (flagged) when the service is down', async () => {
      const fresh = await request(t.baseUrl).get('/v1/tenants/shop/fields').set(op).expect(200);
      expect(fresh.body).toMatchObject({
        environment: 'sandbox',
        stale: false,
        fields: expect.arrayContaining([
          {
            id: 'FLDDEPARTMENT',
            label: 'Department',
            data_type: 'Dropdown',
            options: ['Sales', 'Engineering', 'Support', 'Marketing'],
            required: true,
          },
        ]),
      });
      await control(t, '/faults', { route: 'fields', status: 503 });
      const cache = t.app.get(FieldsCacheService);
      await cache.forceReload(connectionId).catch(() => undefined);
      cache.evictMemory(connectionId);
      const { Client } = await import('pg');
      const db = new Client({ connectionString: t.databaseUrl });
      await db.connect();
      await db.query(
        `UPDATE fields_cache SET fetched_at = now() - interval '1 hour', forced_reload_at = NULL`,
      );
      await db.end();
      const stale = await request(t.baseUrl).get('/v1/tenants/shop/fields').set(op).expect(200);
      expect(stale.body.stale).toBe(true);
      expect(stale.body.fields.length).toBe(fresh.body.fields.length);
    });

    it('answers 409 connection_not_active when the tenant is disconnected', async () => {
      await createTenant(t, 'gone');
      await connectTenant(t, 'gone');
      await request(t.baseUrl).delete('/v1/tenants/gone/connection').set(op).expect(200);
      const res = await send(t, 'gone', 'gone-1', { ...FS, rewards: [reward()] });
      expect(res.status).toBe(409);
      expect(res.body.error).toMatchObject({
        code: 'connection_not_active',
        message: 'The rewards connection is disconnected; the tenant must connect again.',
        details: [{ field: 'connection.status', reason: 'disconnected' }],
      });
      // The connection's other readers resolve it the same way; nothing was stored for the refused send.
      const fields = await request(t.baseUrl).get('/v1/tenants/gone/fields').set(op).expect(409);
      expect(fields.body.error.code).toBe('connection_not_active');
      const stored = await request(t.baseUrl).get('/v1/tenants/gone/dispatches').set(op).expect(200);
      expect(stored.body.dispatches).toEqual([]);
      // Connected again: it sends.
      await connectTenant(t, 'gone');
      await send(t, 'gone', 'gone-2', { ...FS, rewards: [reward()] }).expect(201);
    });
  },
);
