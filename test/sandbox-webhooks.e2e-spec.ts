import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SandboxOptions } from '../src/sandbox/sandbox.app';
import { createSandbox } from '../src/sandbox/sandbox.app';
import type { SandboxPersistence } from '../src/sandbox/sandbox.persistence';
import { CLIENT, connect, get, post } from './support/sandbox';
import { DEMO_API_KEY, OTHER_API_KEY, bearer, setApprovals, singleOrder } from './support/sandbox-orders';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A sandbox of our own on a free port; `stop` also stops its deliveries (the tests' startSandbox closes only HTTP). */
async function listen(options: Partial<SandboxOptions> = {}) {
  const sandbox = createSandbox({
    clients: [
      {
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.clientSecret,
        redirectUris: [CLIENT.redirectUri],
        name: 'Test Platform',
      },
    ],
    control: true,
    ...options,
  });
  await sandbox.ready;
  const server: Server = await new Promise((resolve) => {
    const s = sandbox.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  let stopped: Promise<void> | undefined;
  return {
    ...sandbox,
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Idempotent. */
    stop: () =>
      (stopped ??= (async () => {
        await sandbox.close();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      })()),
  };
}

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: Json;
}

/** A webhook receiver over node:http: records every request and answers from a script (200 when it runs out). */
class Receiver {
  received: Received[] = [];
  /** One per request, in order: a status, `hang` (never answer) or `redirect` (302 to /elsewhere). */
  answers: (number | 'hang' | 'redirect')[] = [];
  url = '';
  private server?: Server;
  private readonly hanging: ServerResponse[] = [];

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        this.received.push({ path: req.url ?? '', headers: req.headers, raw, body: JSON.parse(raw) as Json });
        const answer = this.answers.shift() ?? 200;
        if (answer === 'hang') return void this.hanging.push(res);
        if (answer === 'redirect') {
          res.writeHead(302, { Location: `${this.url.replace(/\/hook$/, '')}/elsewhere` }).end();
          return;
        }
        res.writeHead(answer, { 'Content-Type': 'text/plain' }).end('thanks');
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  reset(): void {
    this.received = [];
    this.answers = [];
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

async function waitFor<T>(read: () => T | Promise<T>, done: (v: T) => boolean, timeoutMs = 3000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting; last value: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 15));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An /api/v2 call whose answer may be empty (204) or text (simulate). */
async function api(baseUrl: string, method: string, path: string, body?: unknown, token = DEMO_API_KEY) {
  const res = await fetch(`${baseUrl}/api/v2${path}`, {
    method,
    headers: { ...bearer(token), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Json = {};
  try {
    json = text ? (JSON.parse(text) as Json) : {};
  } catch {
    // text/plain (simulate)
  }
  return { status: res.status, text, body: json, headers: res.headers };
}

/** The check a receiver makes, done independently of the sandbox's code: HMAC-SHA256 of the raw body, hex. */
function signatureValid(header: string | string[] | undefined, raw: string, privateKey: string): boolean {
  if (typeof header !== 'string' || !header.includes('=')) return false;
  const [algorithm, signature] = [
    header.slice(0, header.indexOf('=')),
    header.slice(header.indexOf('=') + 1),
  ];
  const expected = createHmac('sha256', privateKey).update(raw, 'utf8').digest('hex');
  return (
    algorithm === 'sha256' &&
    signature.length === expected.length &&
    timingSafeEqual(Buffer.from(signature), Buffer.from(expected))
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const CREATED_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$/;

describe('sandbox: webhooks as the service sends them (spec §3)', () => {
  let sb: Awaited<ReturnType<typeof listen>>;
  const receiver = new Receiver();

  beforeAll(async () => {
    sb = await listen();
    await receiver.start();
  });
  afterAll(async () => {
    await sb.stop();
    await receiver.stop();
  });
  beforeEach(async () => {
    await post(sb.baseUrl, '/__control/reset', {});
    await control({ delay_ms: 30, retry_base_ms: 20 });
    receiver.reset();
  });

  async function control(settings: Json): Promise<Json> {
    const res = await post(sb.baseUrl, '/__control/webhooks', settings);
    if (res.status !== 200) throw new Error(`webhook settings refused: ${JSON.stringify(res.body)}`);
    return res.body;
  }
  const register = async (url = receiver.url, token = DEMO_API_KEY) => {
    const res = await api(sb.baseUrl, 'POST', '/webhooks', { url }, token);
    expect(res.status).toBe(200);
    return res.body.webhook as { id: string; url: string; private_key: string };
  };
  const order = async (reward: Json = {}) => {
    const res = await api(sb.baseUrl, 'POST', '/orders', singleOrder({}, reward));
    expect(res.status).toBe(200);
    return res.body.order as Json;
  };
  const deliveries = async (query = '') =>
    (await get(sb.baseUrl, `/__control/webhooks/deliveries${query}`)).body.deliveries as Json[];
  const rewardStatus = async (id: string) =>
    (await api(sb.baseUrl, 'GET', `/rewards/${id}`)).body.reward.delivery.status as string;

  describe('registration', () => {
    it('creates one webhook per account; a second POST changes only its URL; GET, events and DELETE', async () => {
      const created = await register('https://hooks.example.com/a');
      expect(created).toEqual({
        id: expect.stringMatching(/^[A-Z0-9]{4,20}$/),
        url: 'https://hooks.example.com/a',
        private_key: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      const changed = await register('https://hooks.example.com/b');
      expect(changed).toEqual({ ...created, url: 'https://hooks.example.com/b' });
      expect((await api(sb.baseUrl, 'GET', '/webhooks')).body).toEqual({ webhooks: [changed] });
      expect((await api(sb.baseUrl, 'GET', `/webhooks/${created.id}`)).body).toEqual({ webhook: changed });
      expect((await api(sb.baseUrl, 'GET', `/webhooks/${created.id}/events`)).body).toEqual({
        events: ['REWARDS.DELIVERY.SUCCEEDED', 'REWARDS.DELIVERY.FAILED'],
      });
      // Another account sees none of it.
      expect((await api(sb.baseUrl, 'GET', '/webhooks', undefined, OTHER_API_KEY)).body).toEqual({
        webhooks: [],
      });
      expect((await api(sb.baseUrl, 'GET', `/webhooks/${created.id}`, undefined, OTHER_API_KEY)).status).toBe(
        404,
      );

      const deleted = await api(sb.baseUrl, 'DELETE', `/webhooks/${created.id}`);
      expect(deleted.status).toBe(204);
      expect(deleted.text).toBe('');
      expect((await api(sb.baseUrl, 'GET', '/webhooks')).body).toEqual({ webhooks: [] });
      // A new one after the delete has a new id and key.
      const again = await register('https://hooks.example.com/c');
      expect(again.id).not.toBe(created.id);
      expect(again.private_key).not.toBe(created.private_key);
      expect((await get(sb.baseUrl, '/__control/stats')).body.sizes.webhooks).toBe(1);
    });

    it('takes OAuth access tokens as well as API keys; the needed scope is a setting', async () => {
      const token = await connect(sb.baseUrl, 'default');
      const hook = await register('https://hooks.example.com/oauth', token.access_token);
      expect((await api(sb.baseUrl, 'GET', '/webhooks')).body.webhooks[0].id).toBe(hook.id); // the same account
      await control({ scope: 'team_management' });
      const refused = await api(sb.baseUrl, 'GET', '/webhooks', undefined, token.access_token);
      expect(refused.status).toBe(403);
      expect(refused.body.errors.message).toContain('team_management');
      expect((await api(sb.baseUrl, 'GET', '/webhooks')).status).toBe(200); // an API key has every scope
      const both = await connect(sb.baseUrl, 'default team_management');
      expect((await api(sb.baseUrl, 'GET', '/webhooks', undefined, both.access_token)).status).toBe(200);
      expect((await api(sb.baseUrl, 'GET', '/webhooks', undefined, 'not-a-token')).status).toBe(401);
    });

    it('refuses a bad URL with 400 and a clear message, creating nothing', async () => {
      for (const url of [undefined, '', 'not a url', '/relative/hook', 'ftp://hooks.example.com/x', 42]) {
        const res = await api(sb.baseUrl, 'POST', '/webhooks', url === undefined ? {} : { url });
        expect(res.status).toBe(400);
        expect(res.body.errors.message).toMatch(/^url (is required|must be an absolute http or https URL)/);
        expect(res.body.errors.payload).toEqual({ url: url ?? null });
      }
      const creds = await api(sb.baseUrl, 'POST', '/webhooks', { url: 'https://user:pw@hooks.example.com/' });
      expect(creds.status).toBe(400);
      expect(creds.body.errors.message).toBe('url must not contain a user name or password');
      const long = await api(sb.baseUrl, 'POST', '/webhooks', {
        url: `https://h.example.com/${'a'.repeat(3000)}`,
      });
      expect(long.status).toBe(400);
      expect(long.body.errors.message).toBe('url must be at most 2048 characters');
      expect((await api(sb.baseUrl, 'GET', '/webhooks')).body).toEqual({ webhooks: [] });
    });

    it('answers 404 for an unknown id on every /webhooks/{id} route, and 422 for an event it cannot simulate', async () => {
      const hook = await register();
      for (const [method, path, body] of [
        ['GET', '/webhooks/UNKNOWN1234', undefined],
        ['DELETE', '/webhooks/UNKNOWN1234', undefined],
        ['GET', '/webhooks/UNKNOWN1234/events', undefined],
        ['POST', '/webhooks/UNKNOWN1234/simulate', { event: 'REWARDS.DELIVERY.SUCCEEDED' }],
      ] as const) {
        const res = await api(sb.baseUrl, method, path, body);
        expect(res.status).toBe(404);
        expect(res.body.errors).toEqual({ message: 'Webhook not found', payload: { id: 'UNKNOWN1234' } });
      }
      for (const event of ['ORDERS.NOPE', undefined]) {
        const res = await api(sb.baseUrl, 'POST', `/webhooks/${hook.id}/simulate`, event ? { event } : {});
        expect(res.status).toBe(422);
        expect(res.body.errors.message).toBe(
          'event must be one of REWARDS.DELIVERY.SUCCEEDED, REWARDS.DELIVERY.FAILED',
        );
      }
      expect((await api(sb.baseUrl, 'GET', '/webhooks')).body.webhooks).toHaveLength(1);
    });

    it('forgets registrations on /__control/reset', async () => {
      await register();
      await post(sb.baseUrl, '/__control/reset', {});
      expect((await api(sb.baseUrl, 'GET', '/webhooks')).body).toEqual({ webhooks: [] });
    });
  });

  describe('delivery events', () => {
    it('sends REWARDS.DELIVERY.SUCCEEDED, signed with the private key over the body as sent, and the reward shows SUCCEEDED', async () => {
      const hook = await register();
      const created = await order();
      const rewardId = created.rewards[0].id as string;
      expect(created.rewards[0].delivery.status).toBe('SCHEDULED');

      const [got] = await waitFor(
        () => receiver.received,
        (r) => r.length >= 1,
      );
      expect(got.path).toBe('/hook');
      expect(got.headers['content-type']).toBe('application/json');
      expect(got.raw.startsWith('{"event":')).toBe(true); // compact JSON, keys in the documented order
      expect(got.body).toEqual({
        event: 'REWARDS.DELIVERY.SUCCEEDED',
        uuid: expect.stringMatching(UUID),
        created_utc: expect.stringMatching(CREATED_UTC),
        payload: { resource: { id: rewardId, type: 'rewards' }, meta: {} },
      });
      expect(Math.abs(Date.parse(got.body.created_utc as string) - Date.now())).toBeLessThan(5000);
      expect(signatureValid(got.headers['tremendous-webhook-signature'], got.raw, hook.private_key)).toBe(
        true,
      );
      expect(signatureValid(got.headers['tremendous-webhook-signature'], got.raw, 'another key')).toBe(false);

      expect(await rewardStatus(rewardId)).toBe('SUCCEEDED');
      const order2 = await api(sb.baseUrl, 'GET', `/orders/${created.id as string}`);
      expect(order2.body.order.rewards[0].delivery.status).toBe('SUCCEEDED');
      const log = await waitFor(deliveries, (d) => d.length === 1);
      expect(log[0]).toMatchObject({
        account_id: 'acc_demo',
        webhook_id: hook.id,
        url: receiver.url,
        event: 'REWARDS.DELIVERY.SUCCEEDED',
        uuid: got.body.uuid,
        resource_id: rewardId,
        attempt: 1,
        status_code: 200,
        ok: true,
        error: null,
        simulated: false,
        body: got.raw,
        signature: got.headers['tremendous-webhook-signature'],
      });
      expect(receiver.received).toHaveLength(1);
    });

    it('sends REWARDS.DELIVERY.FAILED with its meta for a recipient configured to fail (any case), others succeed', async () => {
      const hook = await register();
      await control({ fail_recipients: ['Bounce@Example.com'] });
      const failing = await order({ recipient: { name: 'Bounce', email: 'bounce@example.COM' } });
      const fine = await order();
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 2,
      );
      const byReward = new Map(receiver.received.map((r) => [r.body.payload.resource.id as string, r]));
      const failed = byReward.get(failing.rewards[0].id as string) as Received;
      expect(failed.body).toMatchObject({
        event: 'REWARDS.DELIVERY.FAILED',
        payload: {
          resource: { id: failing.rewards[0].id, type: 'rewards' },
          meta: { failure_reason: 'email_delivery_failed', retryable: true },
        },
      });
      expect(
        signatureValid(failed.headers['tremendous-webhook-signature'], failed.raw, hook.private_key),
      ).toBe(true);
      expect(byReward.get(fine.rewards[0].id as string)?.body.event).toBe('REWARDS.DELIVERY.SUCCEEDED');
      expect(await rewardStatus(failing.rewards[0].id as string)).toBe('FAILED');
      expect(await rewardStatus(fine.rewards[0].id as string)).toBe('SUCCEEDED');
    });

    it('fails a share of deliveries by ratio, with the configured reason (PHONE rewards too)', async () => {
      await register();
      await control({ failure_ratio: 1, failure_reason: 'invalid_email' });
      const phone = await order({
        delivery: { method: 'PHONE' },
        recipient: { name: 'Sms', phone: '+14155550100' },
      });
      const [got] = await waitFor(
        () => receiver.received,
        (r) => r.length >= 1,
      );
      expect(got.body.event).toBe('REWARDS.DELIVERY.FAILED');
      expect(got.body.payload.meta).toEqual({ failure_reason: 'invalid_email', retryable: false });
      expect(await rewardStatus(phone.rewards[0].id as string)).toBe('FAILED');
      await control({ failure_ratio: 0, failure_reason: null });
      await order();
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 2,
      );
      expect(receiver.received[1].body.event).toBe('REWARDS.DELIVERY.SUCCEEDED');
    });

    it('waits the configured delay: the order is answered at once, the reward stays SCHEDULED until then', async () => {
      await register();
      await control({ delay_ms: 800 });
      const started = Date.now();
      const created = await order();
      expect(receiver.received).toHaveLength(0);
      expect(await rewardStatus(created.rewards[0].id as string)).toBe('SCHEDULED');
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 1,
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(800);
      expect(await rewardStatus(created.rewards[0].id as string)).toBe('SUCCEEDED');
      // /flush delivers whatever waits, at once.
      await control({ delay_ms: 3_600_000 });
      const later = await order();
      expect((await post(sb.baseUrl, '/__control/webhooks/flush', {})).body).toEqual({ flushed: 1 });
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 2,
      );
      expect(await rewardStatus(later.rewards[0].id as string)).toBe('SUCCEEDED');
    });

    it('delivers an order held for approval only once it is approved; a rejected one never', async () => {
      await register();
      await setApprovals(sb.baseUrl, 'acc_demo', true);
      const held = await order();
      const rejected = await order({ recipient: { name: 'No', email: 'no@example.com' } });
      expect(held.status).toBe('PENDING APPROVAL');
      await sleep(150);
      expect(receiver.received).toHaveLength(0);
      expect((await api(sb.baseUrl, 'POST', `/order_approvals/${rejected.id as string}/reject`)).status).toBe(
        200,
      );
      expect((await api(sb.baseUrl, 'POST', `/order_approvals/${held.id as string}/approve`)).status).toBe(
        200,
      );
      const [got] = await waitFor(
        () => receiver.received,
        (r) => r.length >= 1,
      );
      expect(got.body.payload.resource.id).toBe(held.rewards[0].id);
      await sleep(100);
      expect(receiver.received).toHaveLength(1);
      expect(await rewardStatus(rejected.rewards[0].id as string)).toBe('PENDING');
    });

    it('sends nothing for LINK rewards (delivered in the answer) nor when sending is off; deliveries still happen', async () => {
      await register();
      const link = await order({ delivery: { method: 'LINK' }, recipient: { name: 'Link' } });
      expect(link.rewards[0].delivery.status).toBe('SUCCEEDED');
      await control({ enabled: false });
      const quiet = await order();
      await waitFor(
        () => rewardStatus(quiet.rewards[0].id as string),
        (s) => s === 'SUCCEEDED',
      );
      await sleep(100);
      expect(receiver.received).toHaveLength(0);
      expect(await deliveries()).toEqual([]);
    });

    it('stops sending to a deleted webhook, and sends to the new URL after a second POST', async () => {
      const hook = await register(`${receiver.url}?v=1`);
      await register(`${receiver.url}?v=2`);
      await order();
      const [got] = await waitFor(
        () => receiver.received,
        (r) => r.length >= 1,
      );
      expect(got.path).toBe('/hook?v=2');
      expect((await api(sb.baseUrl, 'DELETE', `/webhooks/${hook.id}`)).status).toBe(204);
      const after = await order();
      await waitFor(
        () => rewardStatus(after.rewards[0].id as string),
        (s) => s === 'SUCCEEDED',
      );
      await sleep(100);
      expect(receiver.received).toHaveLength(1);
    });
  });

  describe('retries and test options', () => {
    it('retries a non-2xx answer with backoff, the same uuid and body each time, and gives up after max_attempts', async () => {
      const hook = await register();
      receiver.answers = [500, 503];
      await order();
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 3,
      );
      const [a, b, c] = receiver.received;
      expect(new Set([a.raw, b.raw, c.raw]).size).toBe(1);
      expect(signatureValid(c.headers['tremendous-webhook-signature'], c.raw, hook.private_key)).toBe(true);
      const log = await waitFor(deliveries, (d) => d.length === 3);
      expect(log.map((d) => [d.attempt, d.status_code, d.ok])).toEqual([
        [1, 500, false],
        [2, 503, false],
        [3, 200, true],
      ]);
      expect(log[0].error).toBe('answered 500');
      expect(Date.parse(log[2].at as string) - Date.parse(log[0].at as string)).toBeGreaterThanOrEqual(
        20 + 40 - 5,
      );

      receiver.reset();
      await fetch(`${sb.baseUrl}/__control/webhooks/deliveries`, { method: 'DELETE' });
      await control({ max_attempts: 2 });
      receiver.answers = [500, 500, 500];
      await order();
      await waitFor(deliveries, (d) => d.length === 2);
      await sleep(150);
      expect(receiver.received).toHaveLength(2);
      expect((await get(sb.baseUrl, '/__control/webhooks')).body.stats).toMatchObject({ events_given_up: 1 });
    });

    it('does not follow redirects, and abandons an attempt after the timeout', async () => {
      await register();
      await control({ max_attempts: 2, timeout_ms: 200 });
      receiver.answers = ['redirect', 'redirect'];
      await order();
      const log = await waitFor(deliveries, (d) => d.length === 2);
      expect(log.map((d) => d.status_code)).toEqual([302, 302]);
      expect(receiver.received.map((r) => r.path)).toEqual(['/hook', '/hook']); // never /elsewhere

      await fetch(`${sb.baseUrl}/__control/webhooks/deliveries`, { method: 'DELETE' });
      receiver.reset();
      receiver.answers = ['hang'];
      await order();
      const timed = await waitFor(deliveries, (d) => d.length === 2);
      expect(timed[0]).toMatchObject({
        attempt: 1,
        status_code: null,
        ok: false,
        error: 'no answer within 200 ms',
      });
      expect(timed[1]).toMatchObject({ attempt: 2, status_code: 200, ok: true });
    });

    it('sends every event twice with the same uuid when duplicate is on', async () => {
      await register();
      await control({ duplicate: true });
      await order();
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 2,
      );
      await sleep(100);
      expect(receiver.received).toHaveLength(2);
      expect(receiver.received[0].raw).toBe(receiver.received[1].raw);
    });

    it('out of order: after the outcome, a stale event of the other outcome with an older created_utc', async () => {
      const hook = await register();
      await control({ out_of_order: true });
      const created = await order();
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 2,
      );
      const [first, second] = receiver.received.map((r) => r.body);
      expect(first.event).toBe('REWARDS.DELIVERY.SUCCEEDED');
      expect(second).toMatchObject({
        event: 'REWARDS.DELIVERY.FAILED',
        payload: {
          resource: { id: created.rewards[0].id },
          meta: { failure_reason: 'email_delivery_failed' },
        },
      });
      expect(second.uuid).not.toBe(first.uuid);
      expect(Date.parse(second.created_utc as string)).toBeLessThan(Date.parse(first.created_utc as string));
      for (const r of receiver.received)
        expect(signatureValid(r.headers['tremendous-webhook-signature'], r.raw, hook.private_key)).toBe(true);
      expect(await rewardStatus(created.rewards[0].id as string)).toBe('SUCCEEDED'); // the truth
    });

    it('simulate sends a signed test event about a made-up reward', async () => {
      const hook = await register();
      const res = await api(sb.baseUrl, 'POST', `/webhooks/${hook.id}/simulate`, {
        event: 'REWARDS.DELIVERY.FAILED',
      });
      expect(res.status).toBe(200);
      const [got] = await waitFor(
        () => receiver.received,
        (r) => r.length >= 1,
      );
      expect(got.body).toMatchObject({
        event: 'REWARDS.DELIVERY.FAILED',
        payload: { resource: { id: expect.stringMatching(/^[A-Z0-9]{12}$/), type: 'rewards' } },
      });
      expect(signatureValid(got.headers['tremendous-webhook-signature'], got.raw, hook.private_key)).toBe(
        true,
      );
      expect((await waitFor(deliveries, (d) => d.length === 1))[0].simulated).toBe(true);
    });

    it('refuses bad control settings with 400, changing nothing', async () => {
      const before = (await get(sb.baseUrl, '/__control/webhooks')).body.settings;
      for (const body of [
        { delay_ms: -1 },
        { delay_ms: 1.5 },
        { failure_ratio: 2 },
        { failure_reason: 'bored' },
        { fail_recipients: 'a@example.com' },
        { enabled: 'yes' },
        { max_attempts: 0 },
        { scope: 'admin' },
        { delay_ms: 5, nonsense: true },
      ]) {
        const res = await post(sb.baseUrl, '/__control/webhooks', body);
        expect(res.status).toBe(400);
        expect(typeof res.body.error).toBe('string');
      }
      expect((await get(sb.baseUrl, '/__control/webhooks')).body.settings).toEqual(before);
      expect(before).toEqual({
        enabled: true,
        delay_ms: 30,
        fail_recipients: [],
        failure_ratio: 0,
        failure_reason: null,
        duplicate: false,
        out_of_order: false,
        max_attempts: 4,
        retry_base_ms: 20,
        timeout_ms: 5000,
        scope: 'any',
      });
    });
  });
});

describe('sandbox webhooks: bounds and persistence', () => {
  it('delivers at once (without events) beyond the pending cap, and keeps only the newest attempts', async () => {
    const receiver = new Receiver();
    await receiver.start();
    const sb = await listen({ limits: { pendingWebhookDeliveries: 2, webhookLog: 3 } });
    try {
      await post(sb.baseUrl, '/__control/webhooks', { delay_ms: 3_600_000 });
      const hook = (await api(sb.baseUrl, 'POST', '/webhooks', { url: receiver.url })).body.webhook as Json;
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await api(sb.baseUrl, 'POST', '/orders', singleOrder());
        ids.push(res.body.order.rewards[0].id as string);
      }
      const statuses = await Promise.all(
        ids.map(async (id) => (await api(sb.baseUrl, 'GET', `/rewards/${id}`)).body.reward.delivery.status),
      );
      expect(statuses).toEqual(['SCHEDULED', 'SCHEDULED', 'SUCCEEDED']);
      const overview = (await get(sb.baseUrl, '/__control/webhooks')).body;
      expect(overview.stats).toMatchObject({ waiting: 2, dropped: 1 });
      expect(overview.registrations).toEqual([{ account_id: 'acc_demo', ...hook }]);
      for (let i = 0; i < 5; i++) {
        await api(sb.baseUrl, 'POST', `/webhooks/${hook.id as string}/simulate`, {
          event: 'REWARDS.DELIVERY.SUCCEEDED',
        });
      }
      await waitFor(
        () => receiver.received,
        (r) => r.length >= 5,
      );
      const log = await waitFor(
        async () => (await get(sb.baseUrl, '/__control/webhooks/deliveries')).body.deliveries as Json[],
        (d) => d.length === 3 && d[2].uuid === receiver.received[4].body.uuid,
      );
      expect(log.map((d) => d.uuid)).toEqual(receiver.received.slice(2).map((r) => r.body.uuid));
    } finally {
      await sb.stop();
      await receiver.stop();
    }
  });

  it('keeps registrations and settings across a restart, and delivers the rewards still waiting', async () => {
    const receiver = new Receiver();
    await receiver.start();
    let stored: unknown = null;
    const persistence: SandboxPersistence = {
      load: () => Promise.resolve(stored),
      save: (json) => {
        stored = JSON.parse(json);
        return Promise.resolve();
      },
    };
    const first = await listen({ persistence });
    let second: Awaited<ReturnType<typeof listen>> | undefined;
    let third: Awaited<ReturnType<typeof listen>> | undefined;
    try {
      await post(first.baseUrl, '/__control/webhooks', {
        delay_ms: 3_600_000,
        fail_recipients: ['x@example.com'],
      });
      const hook = (await api(first.baseUrl, 'POST', '/webhooks', { url: receiver.url })).body
        .webhook as Json;
      const waiting = (await api(first.baseUrl, 'POST', '/orders', singleOrder())).body.order.rewards[0]
        .id as string;
      await first.stop(); // the last write, with the reward still SCHEDULED

      second = await listen({ persistence });
      expect((await api(second.baseUrl, 'GET', '/webhooks')).body).toEqual({ webhooks: [hook] });
      const settings = (await get(second.baseUrl, '/__control/webhooks')).body;
      expect(settings.settings).toMatchObject({ delay_ms: 3_600_000, fail_recipients: ['x@example.com'] });
      expect(settings.stats.waiting).toBe(1);
      expect((await post(second.baseUrl, '/__control/webhooks/flush', {})).body).toEqual({ flushed: 1 });
      const [got] = await waitFor(
        () => receiver.received,
        (r) => r.length >= 1,
      );
      expect(got.body.payload.resource.id).toBe(waiting);
      expect(
        signatureValid(got.headers['tremendous-webhook-signature'], got.raw, hook.private_key as string),
      ).toBe(true);
      // The delivery is written with the last write of a clean stop: nothing is delivered twice.
      await second.stop();
      second = undefined;
      third = await listen({ persistence });
      const reward = await api(third.baseUrl, 'GET', `/rewards/${waiting}`);
      expect(reward.body.reward.delivery.status).toBe('SUCCEEDED');
      expect((await get(third.baseUrl, '/__control/webhooks')).body.stats.waiting).toBe(0);
    } finally {
      await first.stop();
      await second?.stop();
      await third?.stop();
      await receiver.stop();
    }
  });
});
