import { Client } from 'pg';
import request from 'supertest';
import { AlertsService } from '../src/ops/alerts.service';
import { OpsService } from '../src/ops/ops.service';
import { ApprovalReconciler } from '../src/reward-dispatch/approval.reconciler';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward, send, waitFor } from './support/send';

/** The current rewards service (single order shape, the sandbox's default): one order per reward, approvals, funding. */
describe('sending through the current rewards service', () => {
  let t: TestApp;
  let db: Client;
  type Order = { id: string; external_id: string; status: string; recipients: string[] };
  const orders = async () =>
    (await request(t.baseUrl).get('/sandbox/__control/orders')).body.orders as Order[];
  const dispatch = (id: string) => request(t.baseUrl).get(`/v1/tenants/shop/dispatches/${id}`).set(op);
  const people = (prefix: string, n: number) =>
    Array.from({ length: n }, (_, i) =>
      reward({ recipient: { name: `${prefix} ${i}`, email: `${prefix}${i}@example.com` } }),
    );

  beforeAll(async () => {
    t = await startTestApp({
      DISPATCH_RETRY_BASE_MS: '100',
      DISPATCH_POLL_MS: '100',
      DISPATCH_UPSTREAM_TIMEOUT_MS: '1000',
      DISPATCH_LEASE_MS: '3000',
      DISPATCH_APPROVAL_CHECK_MS: '200',
      // After invalid_client, sends fail fast for this long (default 10 s) before the token endpoint is asked again.
      TOKEN_APP_CREDENTIALS_RETRY_MS: '2000',
    });
    await control(t, '/reset');
    await createTenant(t, 'shop');
    await connectTenant(t, 'shop');
    db = new Client({ connectionString: t.databaseUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db.end();
    await t.close();
  });
  afterEach(async () => {
    await request(t.baseUrl).delete('/sandbox/__control/faults');
  });

  it('turns a dispatch of 10 rewards into 10 orders with 10 distinct external_ids, each shown with its ids', async () => {
    const res = await send(t, 'shop', 'ten', { rewards: people('ten', 10) }).expect(201);
    expect(res.body).toMatchObject({
      status: 'sent',
      order_shape: 'single',
      upstream_order_id: null,
      counts: { sent: 10, failed: 0 },
    });
    const upstream = (await orders()).filter((o) => o.recipients[0].startsWith('ten'));
    expect(upstream).toHaveLength(10);
    expect(new Set(upstream.map((o) => o.external_id)).size).toBe(10);
    res.body.rewards.forEach((r: Record<string, unknown>, i: number) => {
      const order = upstream.find((o) => o.recipients[0] === `ten${i}@example.com`) as Order;
      expect(r).toMatchObject({
        position: i,
        status: 'sent',
        external_id: `${res.body.id}-r${i}`,
        upstream_order_id: order.id,
        id: expect.stringMatching(/^[A-Z0-9]{12}$/),
      });
      expect(order.external_id).toBe(`${res.body.id}-r${i}`);
    });
    expect((await dispatch(res.body.id).expect(200)).body).toEqual(res.body);
  });

  it('ends partially_failed when reward 3 of 5 is refused (402), the other 4 sent and the reason shown', async () => {
    await request(t.baseUrl)
      .post('/sandbox/__control/accounts/acc_demo/funding-sources/FSDEMOSMALL')
      .send({ balance: 100 });
    const rewards = people('part', 5).map((r, i) => ({
      ...r,
      value: { denomination: i === 2 ? 500 : 20, currency_code: 'USD' },
    }));
    const res = await send(t, 'shop', 'partial', { funding_source_id: 'FSDEMOSMALL', rewards }).expect(201);
    expect(res.body).toMatchObject({ status: 'partially_failed', counts: { sent: 4, failed: 1 } });
    expect(res.body.rewards.map((r: { status: string }) => r.status)).toEqual([
      'sent',
      'sent',
      'failed',
      'sent',
      'sent',
    ]);
    expect(res.body.rewards[2]).toMatchObject({
      id: null,
      upstream_order_id: null,
      error: { code: 'insufficient_funds', upstream_status: 402 },
    });
    expect(
      (await orders())
        .filter((o) => o.recipients[0].startsWith('part'))
        .map((o) => o.recipients[0])
        .sort(),
    ).toEqual(['part0@example.com', 'part1@example.com', 'part3@example.com', 'part4@example.com']);
    const replay = await send(t, 'shop', 'partial', { funding_source_id: 'FSDEMOSMALL', rewards }).expect(
      201,
    );
    expect(replay.body).toEqual(res.body);
  });

  it('fails the whole dispatch with the error shape when every reward is refused', async () => {
    const res = await send(t, 'shop', 'all-bad', {
      rewards: people('bad', 2).map((r) => ({ ...r, products: ['NOSUCHPRODUCT'] })),
    }).expect(422);
    expect(res.body.error).toMatchObject({
      code: 'upstream_rejected',
      details: [
        { field: 'rewards[0]', upstream_status: 400 },
        { field: 'rewards[1]', upstream_status: 400 },
      ],
    });
    const view = (await dispatch(res.body.error.details[0].dispatch_id).expect(200)).body;
    expect(view).toMatchObject({ status: 'failed', counts: { failed: 2 } });
  });

  describe('orders held for approval', () => {
    beforeAll(async () => {
      await request(t.baseUrl)
        .post('/sandbox/__control/accounts/acc_demo/approvals')
        .send({ required: true })
        .expect(200);
    });
    afterAll(async () => {
      await request(t.baseUrl)
        .post('/sandbox/__control/accounts/acc_demo/approvals')
        .send({ required: false })
        .expect(200);
    });

    it('shows a held order as pending_approval (202), never sent, and moves it to sent once approved', async () => {
      const res = await send(t, 'shop', 'held-1', { rewards: people('held', 1) }).expect(202);
      expect(res.body).toMatchObject({
        status: 'pending_approval',
        counts: { pending_approval: 1, sent: 0 },
      });
      expect(res.body.rewards[0]).toMatchObject({
        status: 'pending_approval',
        upstream_order_status: 'PENDING APPROVAL',
        upstream_order_id: expect.any(String),
      });
      // Checked again while still held: stays pending_approval.
      await t.app.get(ApprovalReconciler).tick();
      expect((await dispatch(res.body.id)).body.status).toBe('pending_approval');
      await request(t.baseUrl)
        .post(`/sandbox/__control/orders/${res.body.rewards[0].upstream_order_id}/approve`)
        .expect(200);
      const sent = await waitFor(
        () => dispatch(res.body.id),
        (r) => r.body.status === 'sent',
        10_000,
      );
      expect(sent.body.rewards[0]).toMatchObject({
        status: 'sent',
        upstream_order_status: 'EXECUTED',
        sent_at: expect.any(String),
      });
      const metrics = await request(t.baseUrl).get('/metrics').expect(200);
      expect(metrics.text).toMatch(/rg_dispatch_attempts_total\{outcome="approved"\} [1-9]/);
    });

    it('moves a rejected order to failed with the reason; the others of the dispatch are unaffected', async () => {
      const res = await send(t, 'shop', 'held-2', { rewards: people('rej', 2) }).expect(202);
      const [a, b] = res.body.rewards as { upstream_order_id: string }[];
      await request(t.baseUrl).post(`/sandbox/__control/orders/${a.upstream_order_id}/reject`).expect(200);
      await request(t.baseUrl).post(`/sandbox/__control/orders/${b.upstream_order_id}/approve`).expect(200);
      const done = await waitFor(
        () => dispatch(res.body.id),
        // The dispatch is partially_failed as soon as one reward failed; wait for the approved one to be sent too.
        (r) => r.body.status === 'partially_failed' && r.body.rewards[1].status === 'sent',
        10_000,
      );
      expect(done.body.rewards[0]).toMatchObject({
        status: 'failed',
        upstream_order_status: 'CANCELED',
        error: { code: 'order_rejected' },
      });
      expect(done.body.rewards[1]).toMatchObject({ status: 'sent' });
      await t.app.get(OpsService).gauges.refresh();
      const metrics = await request(t.baseUrl).get('/metrics').expect(200);
      expect(metrics.text).toMatch(/rg_rewards_pending_approval 0/);
    });

    it('treats a held order as pending_approval whatever the HTTP code (an older service answered 202)', async () => {
      await control(t, '/settings', { pending_approval_http_status: 202 });
      const res = await send(t, 'shop', 'held-3', { rewards: people('old', 1) }).expect(202);
      expect(res.body.rewards[0].status).toBe('pending_approval');
      await control(t, '/settings', { pending_approval_http_status: 200 });
    });
  });

  it('hands a LINK reward’s link to the caller, keeps it only encrypted, and replays it', async () => {
    const body = { rewards: [reward({ recipient: { name: 'Link Person' }, delivery: { method: 'LINK' } })] };
    const res = await send(t, 'shop', 'link-1', body).expect(201);
    const link = res.body.rewards[0].delivery.link as string;
    expect(link).toMatch(/^https?:\/\/.+/);
    expect(res.body.rewards[0].delivery).toMatchObject({ method: 'LINK', status: 'SUCCEEDED' });
    const replay = await send(t, 'shop', 'link-1', body).expect(201);
    expect(replay.body.rewards[0].delivery.link).toBe(link);
    const stored = (await db.query(`SELECT * FROM dispatch_rewards WHERE dispatch_id = $1`, [res.body.id]))
      .rows[0];
    expect(JSON.stringify(stored)).not.toContain(link);
    expect(stored.link_enc).toBeTruthy();
  });

  it('checks what each delivery method needs, and takes a campaign instead of products', async () => {
    const phone = await send(t, 'shop', 'phone-1', {
      rewards: [
        reward({ recipient: { name: 'No Phone', email: 'np@example.com' }, delivery: { method: 'PHONE' } }),
      ],
    }).expect(400);
    expect(phone.body.error.details).toEqual([
      { field: 'rewards[0].recipient.phone', reason: 'required for PHONE delivery' },
    ]);
    const noEmail = await send(t, 'shop', 'email-1', {
      rewards: [reward({ recipient: { name: 'No Email' } })],
    }).expect(400);
    expect(noEmail.body.error.details[0].field).toBe('rewards[0].recipient.email');
    const neither = await send(t, 'shop', 'prod-1', {
      rewards: [{ ...reward(), products: undefined }],
    }).expect(400);
    expect(neither.body.error.details[0].field).toBe('rewards[0].products');
    const sms = await send(t, 'shop', 'phone-2', {
      rewards: [reward({ recipient: { name: 'Sms', phone: '+14155550100' }, delivery: { method: 'PHONE' } })],
    }).expect(201);
    expect(sms.body.rewards[0].delivery.method).toBe('PHONE');
    const campaign = await send(t, 'shop', 'camp-1', {
      rewards: [{ ...reward(), products: undefined, campaign_id: 'CAMPAIGNDEMO1' }],
    }).expect(201);
    expect(campaign.body.rewards[0]).toMatchObject({
      status: 'sent',
      campaign_id: 'CAMPAIGNDEMO1',
      products: null,
    });
  });

  it('validates every custom field data type before anything goes upstream, and the service accepts what passes', async () => {
    const demo = (await request(t.baseUrl).get('/sandbox/__control/accounts')).body.accounts.find(
      (a: { id: string }) => a.id === 'acc_demo',
    );
    await request(t.baseUrl)
      .put('/sandbox/__control/accounts/acc_demo/fields')
      .send({
        fields: [
          ...demo.fields,
          {
            id: 'FLDTAGS',
            label: 'Tags',
            data_type: 'List',
            data: { options: ['new', 'vip', 'remote'] },
            required: false,
          },
          { id: 'FLDOPTIN', label: 'OptIn', data_type: 'Checkbox', required: false },
          { id: 'FLDSTART', label: 'StartDate', data_type: 'Date', required: false },
          { id: 'FLDBUDGET', label: 'Budget', data_type: 'Currency', required: false },
        ],
      });
    await request(t.baseUrl)
      .delete(
        `/v1/ops/connections/${(await request(t.baseUrl).get('/v1/tenants/shop/connection').set(op)).body.id}/fields-cache`,
      )
      .set(op)
      .expect(204);
    const before = (await orders()).length;
    const bad = await send(t, 'shop', 'types-bad', {
      rewards: [
        reward({
          custom_fields: {
            Department: 'Sales',
            Tags: ['vip', 'gold'],
            OptIn: 'maybe',
            StartDate: '2026-13-01',
            Budget: '1.234',
          },
        }),
      ],
    }).expect(422);
    expect(bad.body.error.code).toBe('invalid_custom_field_value');
    expect(bad.body.error.details.map((d: { field: string }) => d.field).sort()).toEqual([
      'rewards[0].custom_fields.Budget',
      'rewards[0].custom_fields.OptIn',
      'rewards[0].custom_fields.StartDate',
      'rewards[0].custom_fields.Tags',
    ]);
    expect((await orders()).length).toBe(before);
    const good = await send(t, 'shop', 'types-good', {
      rewards: [
        reward({
          custom_fields: {
            Department: 'Sales',
            Tags: ['vip', 'remote'],
            OptIn: true,
            StartDate: '2026-12-01',
            Budget: 12.5,
          },
        }),
      ],
    }).expect(201);
    expect(good.body.rewards[0].custom_fields).toEqual(
      expect.arrayContaining([
        { id: 'FLDTAGS', label: 'Tags', value: 'vip,remote' },
        { id: 'FLDOPTIN', label: 'OptIn', value: 'true' },
        { id: 'FLDBUDGET', label: 'Budget', value: '12.5' },
      ]),
    );
    await request(t.baseUrl).put('/sandbox/__control/accounts/acc_demo/fields').send({ fields: demo.fields });
  });

  it('on invalid_client: no connection changes status, one alert, sends answer 503 and nothing is stored', async () => {
    await createTenant(t, 'other');
    await connectTenant(t, 'other');
    const statuses = async () =>
      (
        await db.query(
          `SELECT tenant_id, status FROM connections WHERE status <> 'disconnected' ORDER BY tenant_id`,
        )
      ).rows;
    const before = await statuses();
    // The token endpoint refuses our client credentials; the upstream clock moves past every token's expiry.
    await control(t, '/faults', { route: 'token', status: 401 });
    await control(t, '/clock/advance', { seconds: 3 * 3600 });
    const answers = [];
    for (const [tenant, key] of [
      ['shop', 'ic-1'],
      ['other', 'ic-2'],
      ['shop', 'ic-3'],
    ])
      answers.push(await send(t, tenant, key, { rewards: [reward()] }));
    for (const a of answers) {
      expect(a.status).toBe(503);
      expect(a.body.error.code).toBe('upstream_app_credentials_invalid');
      expect(a.headers['retry-after']).toBeDefined();
    }
    expect(
      (await db.query(`SELECT count(*)::int AS n FROM reward_dispatches WHERE idempotency_key LIKE 'ic-%'`))
        .rows[0].n,
    ).toBe(0);
    expect(await statuses()).toEqual(before);
    const alerts = t.app.get(AlertsService);
    await Promise.all([alerts.detectTransitions(), alerts.detectTransitions()]);
    await alerts.detectTransitions();
    const kinds = async () =>
      (
        await db.query(
          `SELECT kind, payload->>'environment' AS env FROM ops_alerts WHERE connection_id IS NULL ORDER BY id`,
        )
      ).rows;
    expect(await kinds()).toEqual([{ kind: 'app_credentials.invalid', env: 'sandbox' }]);
    await t.app.get(OpsService).gauges.refresh(); // gauges are snapshots, refreshed in the background
    const metrics = await request(t.baseUrl).get('/metrics').expect(200);
    expect(metrics.text).toMatch(/rg_app_credentials_invalid\{environment="sandbox"\} 1/);

    // Fixed: after the fast-fail window the same key goes through, and the recovery is alerted once.
    await request(t.baseUrl).delete('/sandbox/__control/faults');
    const retried = await waitFor(
      () => send(t, 'shop', 'ic-1', { rewards: [reward()] }),
      (r) => r.status === 201,
      20_000,
    );
    expect(retried.body.status).toBe('sent');
    await alerts.detectTransitions();
    expect(await kinds()).toEqual([
      { kind: 'app_credentials.invalid', env: 'sandbox' },
      { kind: 'app_credentials.recovered', env: 'sandbox' },
    ]);
    expect(await statuses()).toEqual(before);
  }, 60_000);
});
