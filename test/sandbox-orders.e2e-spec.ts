import { get, post } from './support/sandbox';
import {
  OTHER_API_KEY,
  SERVICE_ID_12,
  apiGet,
  bearer,
  sendOrder,
  setApprovals,
  setBalance,
  setSettings,
  singleOrder,
  useSandbox,
} from './support/sandbox-orders';

/** Orders as the current service takes them (spec rewards-service-current.md §1, §2), over real HTTP. */
describe('sandbox: orders in the current service’s form', () => {
  const sb = useSandbox();

  const orderCount = async () => (await get(sb.baseUrl, '/__control/orders')).body.total_count as number;
  const available = async (id: string) =>
    (await apiGet(sb.baseUrl, `/funding_sources/${id}`)).body.funding_source.meta.available_amount as number;

  describe('idempotency and the single reward', () => {
    it('answers 200 for a new order, 201 with the same order for a replay, 409 for another payload', async () => {
      const first = await sendOrder(sb.baseUrl, singleOrder({ external_id: 'gw-0001' }));
      expect(first.status).toBe(200);
      expect(first.body.order.id).toMatch(SERVICE_ID_12);
      expect(first.body.order.rewards).toHaveLength(1);
      expect(first.body.order.rewards[0].id).toMatch(SERVICE_ID_12);
      const replay = await sendOrder(sb.baseUrl, singleOrder({ external_id: 'gw-0001' }));
      expect(replay.status).toBe(201);
      expect(replay.body).toEqual(first.body);
      const conflict = await sendOrder(
        sb.baseUrl,
        singleOrder({ external_id: 'gw-0001' }, { recipient: { name: 'Other', email: 'other@example.com' } }),
      );
      expect(conflict.status).toBe(409);
      expect(conflict.body.errors).toEqual({
        message: expect.any(String),
        payload: { external_id: 'gw-0001' },
      });
      expect(await orderCount()).toBe(1);
      expect(await available('FSDEMOMAIN')).toBe(10_000_000 - 25); // charged once
    });

    it('refuses a rewards array in single mode with 400, creating nothing', async () => {
      const body = { payment: { funding_source_id: 'FSDEMOMAIN' }, rewards: [singleOrder().reward] };
      const res = await sendOrder(sb.baseUrl, body);
      expect(res.status).toBe(400);
      expect(res.body.errors.message).toContain(
        'multi-reward orders are not supported; send one reward per order',
      );
      expect(Object.keys(res.body.errors.payload)).toEqual(['rewards']);
      expect(await orderCount()).toBe(0);
    });

    it('refuses a body without a reward', async () => {
      const res = await sendOrder(sb.baseUrl, { payment: { funding_source_id: 'FSDEMOMAIN' } });
      expect(res.status).toBe(400);
      expect(res.body.errors.payload).toEqual({ reward: null });
    });
  });

  describe('funding', () => {
    it('takes BALANCE case-insensitively as the account’s balance funding source', async () => {
      const res = await sendOrder(
        sb.baseUrl,
        singleOrder(
          { payment: { funding_source_id: 'balance' } },
          { value: { denomination: 40, currency_code: 'USD' } },
        ),
      );
      expect(res.status).toBe(200);
      expect(await available('FSDEMOMAIN')).toBe(10_000_000 - 40);
      expect(await available('FSDEMOSMALL')).toBe(100);
    });

    it('answers 402 with the service’s message when the funding source lacks funds, and takes nothing', async () => {
      const res = await sendOrder(
        sb.baseUrl,
        singleOrder(
          { payment: { funding_source_id: 'FSDEMOSMALL' } },
          { value: { denomination: 150, currency_code: 'USD' } },
        ),
      );
      expect(res.status).toBe(402);
      expect(res.body).toEqual({
        errors: {
          message: 'Not enough funds to carry out this operation. Fund your balance to proceed.',
          payload: {},
        },
      });
      expect(await available('FSDEMOSMALL')).toBe(100);
      await setBalance(sb.baseUrl, 'acc_demo', 'FSDEMOMAIN', 10);
      expect(
        (await sendOrder(sb.baseUrl, singleOrder({ payment: { funding_source_id: 'BALANCE' } }))).status,
      ).toBe(402);
      expect(await orderCount()).toBe(0);
    });

    it('accepts INVOICE and INVOICE_THEN_BALANCE without a funds limit', async () => {
      await setBalance(sb.baseUrl, 'acc_demo', 'FSDEMOMAIN', 0);
      expect(
        (await sendOrder(sb.baseUrl, singleOrder({ payment: { funding_source_id: 'INVOICE' } }))).status,
      ).toBe(200);
      expect(
        (await sendOrder(sb.baseUrl, singleOrder({ payment: { funding_source_id: 'invoice_then_balance' } })))
          .status,
      ).toBe(200);
      expect(await available('FSDEMOMAIN')).toBe(0);
    });

    it('refuses a funding source id of the wrong form', async () => {
      const res = await sendOrder(
        sb.baseUrl,
        singleOrder({ payment: { funding_source_id: 'fs_demo_main' } }),
      );
      expect(res.status).toBe(400);
      expect(res.body.errors.payload).toEqual({ 'payment.funding_source_id': 'fs_demo_main' });
    });
  });

  describe('delivery methods', () => {
    it('returns a LINK reward’s link once, in the response that created the order', async () => {
      const body = singleOrder(
        { external_id: 'link-1' },
        { delivery: { method: 'LINK' }, recipient: { name: 'Only A Name' } },
      );
      const created = await sendOrder(sb.baseUrl, body);
      expect(created.status).toBe(200);
      const reward = created.body.order.rewards[0];
      expect(reward.delivery).toEqual({
        method: 'LINK',
        status: 'SUCCEEDED',
        link: expect.stringMatching(/^https:\/\/[^/]+\/rewards\/payout\/\S+$/),
      });
      expect(reward.recipient).toEqual({ name: 'Only A Name' });
      const replay = await sendOrder(sb.baseUrl, body);
      expect(replay.status).toBe(201);
      expect(replay.body.order.rewards[0].delivery).toEqual({ method: 'LINK', status: 'SUCCEEDED' });
      for (const path of [`/orders/${created.body.order.id}`, '/orders/link-1', '/orders']) {
        const res = await apiGet(sb.baseUrl, path);
        expect(JSON.stringify(res.body)).not.toContain('/rewards/payout/');
        expect(JSON.stringify(res.body)).toContain(reward.id);
      }
      for (const path of [`/rewards/${reward.id}`, '/rewards']) {
        const res = await apiGet(sb.baseUrl, path);
        expect(JSON.stringify(res.body)).toContain(reward.id);
        expect(JSON.stringify(res.body)).not.toContain('link');
      }
    });

    it('needs a phone number for PHONE and an e-mail address for EMAIL (the default)', async () => {
      const noPhone = await sendOrder(
        sb.baseUrl,
        singleOrder({}, { delivery: { method: 'PHONE' }, recipient: { name: 'P' } }),
      );
      expect(noPhone.status).toBe(400);
      expect(Object.keys(noPhone.body.errors.payload)).toEqual(['reward.recipient.phone']);
      const badPhone = await sendOrder(
        sb.baseUrl,
        singleOrder({}, { delivery: { method: 'PHONE' }, recipient: { name: 'P', phone: '12-34' } }),
      );
      expect(Object.keys(badPhone.body.errors.payload)).toEqual(['reward.recipient.phone']);
      const phone = await sendOrder(
        sb.baseUrl,
        singleOrder(
          {},
          { delivery: { method: 'PHONE' }, recipient: { name: 'P', phone: '+44 20-7946-0958' } },
        ),
      );
      expect(phone.status).toBe(200);
      expect(phone.body.order.rewards[0].delivery).toEqual({ method: 'PHONE', status: 'SCHEDULED' });
      const noEmail = await sendOrder(
        sb.baseUrl,
        singleOrder({}, { delivery: undefined, recipient: { name: 'E' } }),
      );
      expect(noEmail.status).toBe(400);
      expect(Object.keys(noEmail.body.errors.payload)).toEqual(['reward.recipient.email']);
      const defaulted = await sendOrder(sb.baseUrl, singleOrder({}, { delivery: undefined }));
      expect(defaulted.body.order.rewards[0].delivery).toEqual({ method: 'EMAIL', status: 'SCHEDULED' });
      const recipients = (await get(sb.baseUrl, '/__control/orders')).body.orders.map(
        (o: { recipients: string[] }) => o.recipients,
      );
      expect(recipients).toEqual([['+44 20-7946-0958'], ['ada@example.com']]);
    });
  });

  describe('campaigns and products', () => {
    it('takes a campaign_id instead of products and validates against the campaign’s products', async () => {
      const viaCampaign = await sendOrder(
        sb.baseUrl,
        singleOrder({}, { products: undefined, campaign_id: 'CAMPAIGNDEMO1' }),
      );
      expect(viaCampaign.status).toBe(200);
      expect(viaCampaign.body.order.campaign_id).toBe('CAMPAIGNDEMO1');
      // PRODAMAZONUS (in the campaign) stops at 2000; PRODCHOICE alone allows it.
      const tooBig = await sendOrder(
        sb.baseUrl,
        singleOrder(
          {},
          {
            products: undefined,
            campaign_id: 'CAMPAIGNDEMO1',
            value: { denomination: 3000, currency_code: 'USD' },
          },
        ),
      );
      expect(tooBig.status).toBe(422);
      expect(Object.keys(tooBig.body.errors.payload)).toEqual(['reward.value.denomination']);
      const overridden = await sendOrder(
        sb.baseUrl,
        singleOrder(
          {},
          {
            products: ['PRODCHOICE'],
            campaign_id: 'CAMPAIGNDEMO1',
            value: { denomination: 3000, currency_code: 'USD' },
          },
        ),
      );
      expect(overridden.status).toBe(200);
      const unknown = await sendOrder(
        sb.baseUrl,
        singleOrder({}, { products: undefined, campaign_id: 'NOCAMPAIGN' }),
      );
      expect(unknown.status).toBe(400);
      expect(Object.keys(unknown.body.errors.payload)).toEqual(['reward.campaign_id']);
      const malformed = await sendOrder(
        sb.baseUrl,
        singleOrder({}, { products: undefined, campaign_id: 'camp-1' }),
      );
      expect(Object.keys(malformed.body.errors.payload)).toEqual(['reward.campaign_id']);
      const filtered = await apiGet(sb.baseUrl, '/orders?campaign_id=CAMPAIGNDEMO1');
      expect(filtered.body.total_count).toBe(2);
      const wrongCurrency = await sendOrder(
        sb.baseUrl,
        singleOrder({}, { value: { denomination: 5, currency_code: 'EUR' } }),
      );
      expect(wrongCurrency.status).toBe(422);
    });

    it('lists funding sources, products, campaigns and the organization in the service’s shapes', async () => {
      const sources = await apiGet(sb.baseUrl, '/funding_sources');
      expect(sources.body.funding_sources).toEqual([
        {
          id: 'FSDEMOMAIN',
          method: 'balance',
          usage_permissions: ['api_orders', 'dashboard_orders', 'balance_funding'],
          status: 'active',
          meta: {
            available_cents: 1_000_000_000,
            available_amount: 10_000_000,
            currency_code: 'USD',
            pending_cents: 0,
          },
        },
        expect.objectContaining({
          id: 'FSDEMOSMALL',
          method: 'credit_card',
          meta: expect.objectContaining({ available_cents: 10_000 }),
        }),
      ]);
      expect((await apiGet(sb.baseUrl, '/funding_sources/BALANCE')).body.funding_source.id).toBe(
        'FSDEMOMAIN',
      );
      expect((await apiGet(sb.baseUrl, '/funding_sources/FSDEMOSMALL')).body.funding_source.method).toBe(
        'credit_card',
      );
      const missingSource = await apiGet(sb.baseUrl, '/funding_sources/FSNOPE');
      expect(missingSource.status).toBe(404);
      expect(missingSource.body).toEqual({ errors: { message: 'Funding source not found', payload: {} } });

      const products = await apiGet(sb.baseUrl, '/products');
      expect(products.body.products.map((p: { id: string }) => p.id)).toEqual([
        'PRODAMAZONUS',
        'PRODVISAPREPAID',
        'PRODCHOICE',
      ]);
      expect((await apiGet(sb.baseUrl, '/products/PRODVISAPREPAID')).body.product).toEqual({
        id: 'PRODVISAPREPAID',
        name: 'Visa Prepaid Card',
        description: '',
        category: 'merchant_card',
        currency_codes: ['USD'],
        countries: [{ abbr: 'US' }],
        skus: [{ min: 5, max: 1000 }],
        images: [],
      });
      expect((await apiGet(sb.baseUrl, '/products/NOPRODUCT')).status).toBe(404);

      const campaigns = await apiGet(sb.baseUrl, '/campaigns');
      expect(campaigns.body).toEqual({
        campaigns: [
          {
            id: 'CAMPAIGNDEMO1',
            name: 'Q4 Kudos',
            description: '',
            products: ['PRODAMAZONUS', 'PRODCHOICE'],
          },
        ],
      });
      expect((await apiGet(sb.baseUrl, '/campaigns/CAMPAIGNDEMO1')).body.campaign.name).toBe('Q4 Kudos');
      expect((await apiGet(sb.baseUrl, '/campaigns/CAMPAIGNDEMO1', OTHER_API_KEY)).status).toBe(404);

      const demoOrg = (await apiGet(sb.baseUrl, '/organizations')).body.organizations[0];
      const otherOrg = (await apiGet(sb.baseUrl, '/organizations', OTHER_API_KEY)).body.organizations[0];
      expect(demoOrg).toMatchObject({
        id: expect.stringMatching(SERVICE_ID_12),
        name: 'Demo Rewards Co',
        currency_code: 'USD',
        status: 'APPROVED',
      });
      expect(otherOrg.id).toMatch(SERVICE_ID_12);
      expect(otherOrg.id).not.toBe(demoOrg.id);
      await post(sb.baseUrl, '/__control/reset', {});
      expect((await apiGet(sb.baseUrl, '/organizations')).body.organizations[0].id).toBe(demoOrg.id); // stable per account
      expect((await apiGet(sb.baseUrl, `/organizations/${demoOrg.id}`)).body.organization).toEqual(demoOrg);
      expect((await apiGet(sb.baseUrl, `/organizations/${otherOrg.id}`)).status).toBe(404);
    });
  });

  describe('GET /orders', () => {
    it('finds an order by id or external_id, only in its own account', async () => {
      const created = (await sendOrder(sb.baseUrl, singleOrder({ external_id: 'find-me' }))).body.order;
      const byId = await apiGet(sb.baseUrl, `/orders/${created.id}`);
      expect(byId.status).toBe(200);
      expect(byId.body).toEqual({ order: created });
      expect((await apiGet(sb.baseUrl, '/orders/find-me')).body).toEqual({ order: created });
      const missing = await apiGet(sb.baseUrl, '/orders/NOSUCHORDER1');
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ errors: { message: 'Order not found', payload: {} } });
      expect((await apiGet(sb.baseUrl, `/orders/${created.id}`, OTHER_API_KEY)).status).toBe(404);
    });

    it('lists orders newest first with paging (limit default 10, at most 500), external_id filter and total_count', async () => {
      for (let i = 0; i < 12; i++)
        expect((await sendOrder(sb.baseUrl, singleOrder({ external_id: `list-${i}` }))).status).toBe(200);
      const first = await apiGet(sb.baseUrl, '/orders');
      expect(first.body.total_count).toBe(12);
      expect(first.body.orders.map((o: { external_id: string }) => o.external_id)).toEqual(
        Array.from({ length: 10 }, (_v, i) => `list-${11 - i}`),
      );
      const second = await apiGet(sb.baseUrl, '/orders?offset=10&limit=500');
      expect(second.body.orders.map((o: { external_id: string }) => o.external_id)).toEqual([
        'list-1',
        'list-0',
      ]);
      expect((await apiGet(sb.baseUrl, '/orders?limit=501')).status).toBe(400);
      const one = await apiGet(sb.baseUrl, '/orders?external_id=list-3');
      expect(one.body).toMatchObject({ total_count: 1, orders: [{ external_id: 'list-3' }] });
      expect((await apiGet(sb.baseUrl, '/orders', OTHER_API_KEY)).body.total_count).toBe(0);
    });
  });

  describe('orders held for approval', () => {
    beforeEach(async () => {
      await setApprovals(sb.baseUrl, 'acc_demo', true);
    });
    const approval = (id: string, decision: 'approve' | 'reject') =>
      post(
        sb.baseUrl,
        `/api/v2/order_approvals/${id}/${decision}`,
        {},
        bearer('sbx_account_demo_key_0000000000000000'),
      );

    it('holds a new order in PENDING APPROVAL without taking funds, then approval executes it', async () => {
      const created = await sendOrder(
        sb.baseUrl,
        singleOrder({ external_id: 'held-1' }, { value: { denomination: 70, currency_code: 'USD' } }),
      );
      expect(created.status).toBe(200);
      expect(created.body.order.status).toBe('PENDING APPROVAL');
      expect(created.body.order.payment).toBeUndefined();
      expect(created.body.order.rewards[0].delivery).toEqual({ method: 'EMAIL', status: 'PENDING' });
      expect(await available('FSDEMOMAIN')).toBe(10_000_000);
      const approved = await approval('held-1', 'approve');
      expect(approved.status).toBe(200);
      expect(approved.body.order).toMatchObject({
        id: created.body.order.id,
        status: 'EXECUTED',
        payment: { total: 70 },
      });
      expect(approved.body.order.rewards[0].delivery).toEqual({ method: 'EMAIL', status: 'SCHEDULED' });
      expect(await available('FSDEMOMAIN')).toBe(10_000_000 - 70);
      const again = await approval(created.body.order.id, 'approve');
      expect(again.status).toBe(422);
      expect(again.body.errors.message).toBe('Order is not pending approval');
      expect(await available('FSDEMOMAIN')).toBe(10_000_000 - 70);
      const listed = (await get(sb.baseUrl, '/__control/orders')).body.orders[0];
      expect(listed).toMatchObject({
        status: 'EXECUTED',
        reward_ids: [created.body.order.rewards[0].id],
        recipients: ['ada@example.com'],
      });
    });

    it('rejects a held order: CANCELED, nothing charged, and it cannot be approved afterwards', async () => {
      const created = await sendOrder(sb.baseUrl, singleOrder());
      const rejected = await approval(created.body.order.id, 'reject');
      expect(rejected.status).toBe(200);
      expect(rejected.body.order.status).toBe('CANCELED');
      expect((await approval(created.body.order.id, 'approve')).status).toBe(422);
      expect((await approval(created.body.order.id, 'reject')).status).toBe(422);
      expect((await apiGet(sb.baseUrl, `/orders/${created.body.order.id}`)).body.order.status).toBe(
        'CANCELED',
      );
      expect(await available('FSDEMOMAIN')).toBe(10_000_000);
      expect((await approval('NOSUCHORDER1', 'approve')).status).toBe(404);
    });

    it('answers 402 on approval when funds ran short, leaving the order pending', async () => {
      const created = await sendOrder(
        sb.baseUrl,
        singleOrder(
          { payment: { funding_source_id: 'FSDEMOSMALL' } },
          { value: { denomination: 80, currency_code: 'USD' } },
        ),
      );
      await setBalance(sb.baseUrl, 'acc_demo', 'FSDEMOSMALL', 50);
      const short = await approval(created.body.order.id, 'approve');
      expect(short.status).toBe(402);
      expect(short.body.errors.message).toBe(
        'Not enough funds to carry out this operation. Fund your balance to proceed.',
      );
      expect((await apiGet(sb.baseUrl, `/orders/${created.body.order.id}`)).body.order.status).toBe(
        'PENDING APPROVAL',
      );
      expect(await available('FSDEMOSMALL')).toBe(50);
      await setBalance(sb.baseUrl, 'acc_demo', 'FSDEMOSMALL', 100);
      const viaControl = await post(sb.baseUrl, `/__control/orders/${created.body.order.id}/approve`, {});
      expect(viaControl.status).toBe(200);
      expect(viaControl.body.order.status).toBe('EXECUTED');
      expect(await available('FSDEMOSMALL')).toBe(20);
    });

    it('answers the configured status for a held order, and a LINK reward succeeds on approval', async () => {
      await setSettings(sb.baseUrl, { pending_approval_http_status: 202 });
      const created = await sendOrder(sb.baseUrl, singleOrder({}, { delivery: { method: 'LINK' } }));
      expect(created.status).toBe(202);
      expect(created.body.order.rewards[0].delivery).toMatchObject({ method: 'LINK', status: 'PENDING' });
      const approved = await post(sb.baseUrl, `/__control/orders/${created.body.order.id}/approve`, {});
      expect(approved.body.order.rewards[0].delivery).toEqual({ method: 'LINK', status: 'SUCCEEDED' });
      expect((await post(sb.baseUrl, '/__control/orders/NOSUCHORDER1/reject', {})).status).toBe(404);
      expect(
        (await post(sb.baseUrl, '/__control/settings', { pending_approval_http_status: 204 })).status,
      ).toBe(400);
    });

    it('executes at once again when approvals are turned off', async () => {
      await setApprovals(sb.baseUrl, 'acc_demo', false);
      expect((await sendOrder(sb.baseUrl, singleOrder())).body.order.status).toBe('EXECUTED');
    });
  });
});
