import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { freePort } from './support/app';
import { createTestDatabase, sqlOn } from './support/database';
import { startGatewayProcess, waitUntilGone } from './support/gateway-process';
import { createConnectedTenant } from './support/connect';
import type { RunningSandbox } from './support/sandbox';
import { startSandbox } from './support/sandbox';
import { waitFor } from './support/send';
import { verified, WebhookReceiver } from './support/webhook-receiver';

const OPERATOR = `rgo_whcrash_${'k'.repeat(30)}`;

/**
 * The outbox is written in the transaction of each state change: a gateway killed with SIGKILL after the change and
 * before (or during) the delivery loses no event — the next process delivers every one.
 */
describe('tenant webhooks: the gateway killed with SIGKILL between a state change and its delivery', () => {
  let sandbox: RunningSandbox;
  let db: { url: string; drop: () => Promise<void> };
  let gateway: ChildProcess | null = null;
  let env: Record<string, string>;
  let base: string;
  let port: number;
  let receiverPort: number;
  let receiver: WebhookReceiver;
  let secret: string;
  let endpointId: string;
  const sql = (text: string, params: unknown[] = []) => sqlOn(db.url, text, params);
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: {
        Authorization: `Bearer ${OPERATOR}`,
        'Content-Type': 'application/json',
        ...(init.headers ?? {}),
      },
    });
  const sendOne = async (key: string) => {
    const res = await api('/v1/tenants/crashy/rewards', {
      method: 'POST',
      headers: { 'Idempotency-Key': key },
      body: JSON.stringify({
        rewards: [
          {
            recipient: { name: key, email: `${key}@example.com` },
            value: { denomination: 10, currency_code: 'USD' },
            products: ['PRODAMAZONUS'],
            custom_fields: { Department: 'Sales' },
          },
        ],
      }),
    });
    expect(res.status).toBe(201);
  };
  const kill = async () => {
    gateway?.kill('SIGKILL');
    await waitUntilGone(gateway as ChildProcess);
  };

  beforeAll(async () => {
    port = await freePort();
    receiverPort = await freePort(); // nothing listens there yet: the endpoint is unreachable
    base = `http://127.0.0.1:${port}`;
    sandbox = await startSandbox([`${base}/oauth/callback`]);
    db = await createTestDatabase();
    env = {
      DATABASE_URL: db.url,
      PUBLIC_BASE_URL: base,
      OPERATOR_API_KEY: OPERATOR,
      VAULT_KEYS: `crash:${randomBytes(32).toString('base64')}`,
      REWARDS_SANDBOX_BASE_URL: sandbox.baseUrl,
      REWARDS_SANDBOX_CLIENT_ID: 'test-client',
      REWARDS_SANDBOX_CLIENT_SECRET: 'test-secret-value',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_POLL_MS: '100',
      WEBHOOK_RETRY_SCHEDULE_MS: '200,400,800',
      WEBHOOK_TIMEOUT_MS: '1000',
      // A claim's lease is the timeout plus this margin (default 20 s): a dead process's claims come back sooner.
      WEBHOOK_LEASE_MARGIN_MS: '2000',
      LOG_LEVEL: 'error',
    };
    gateway = await startGatewayProcess(env, port);
    // Connect through the real flow: gateway → sandbox (auto-approve) → callback.
    sandbox.state.settings.autoApprove = true;
    await createConnectedTenant(api, 'crashy');
    const registered = await api('/v1/tenants/crashy/webhooks', {
      method: 'POST',
      body: JSON.stringify({
        url: `http://127.0.0.1:${receiverPort}/hook`,
        events: ['reward.sent', 'dispatch.completed'],
      }),
    });
    expect(registered.status).toBe(201);
    ({ id: endpointId, secret } = (await registered.json()) as { id: string; secret: string });
  }, 120_000);

  afterAll(async () => {
    if (gateway && gateway.exitCode === null) {
      gateway.kill('SIGTERM');
      await waitUntilGone(gateway);
    }
    await receiver?.stop();
    await sandbox.close();
    await db.drop();
  });

  it('delivers every event after a restart when the endpoint was unreachable at the time of the kill', async () => {
    for (let i = 0; i < 4; i++) await sendOne(`down-${i}`);
    // In the outbox as soon as the sends were answered: the rows committed with the state changes.
    const rows = await sql(`SELECT id, event_type FROM webhook_outbox WHERE endpoint_id = $1`, [endpointId]);
    expect(rows).toHaveLength(8);
    // Tried and failed (connection refused) at least once each.
    await waitFor(
      async () =>
        sql(`SELECT min(attempts)::int AS a FROM webhook_outbox WHERE endpoint_id = $1`, [endpointId]),
      (r) => r[0].a >= 1,
    );
    await kill();

    receiver = await new WebhookReceiver().start(receiverPort);
    gateway = await startGatewayProcess(env, port);
    await waitFor(
      async () => new Set(receiver.accepted('/hook').map((r) => r.id)).size,
      (n) => n >= 8,
      30_000,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const accepted = receiver.accepted('/hook');
    expect(accepted).toHaveLength(8); // none lost, none twice
    expect(accepted.map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    const types = accepted.map((r) => verified(secret, r).type).sort();
    expect(types).toEqual([...Array(4).fill('dispatch.completed'), ...Array(4).fill('reward.sent')]);
    const states = await sql(
      `SELECT status, count(*)::int AS n FROM webhook_outbox WHERE endpoint_id = $1 GROUP BY status`,
      [endpointId],
    );
    expect(states).toEqual([{ status: 'delivered', n: 8 }]);
  }, 120_000);

  it('delivers the events whose attempt was in flight when the process died, once its lease ends', async () => {
    receiver.answer = () => 0; // the endpoint accepts the requests and never answers
    const before = receiver.received.length;
    for (let i = 0; i < 2; i++) await sendOne(`hang-${i}`);
    const rows = await sql(`SELECT id FROM webhook_outbox WHERE endpoint_id = $1 AND status = 'pending'`, [
      endpointId,
    ]);
    expect(rows).toHaveLength(4);
    // All four in flight, the sender waiting for an answer — then killed.
    await waitFor(
      async () => receiver.received.length - before,
      (n) => n >= 4,
    );
    await kill();
    // Where the dead process's leases end (each claim moved the row's next attempt that far ahead).
    const leases = new Map(
      (
        await sql(
          `SELECT id, (extract(epoch FROM next_attempt_at) * 1000)::float8 AS until_ms FROM webhook_outbox WHERE id = ANY($1::uuid[])`,
          [rows.map((r) => r.id)],
        )
      ).map((r) => [r.id as string, r.until_ms as number]),
    );

    receiver.answer = () => 200;
    gateway = await startGatewayProcess(env, port);
    // The dead process's claims are leases: the rows come back when they end (timeout + margin), not before.
    const arrived = await waitFor(
      async () => receiver.accepted('/hook').filter((r) => rows.some((row) => row.id === r.id)),
      (list) => new Set(list.map((r) => r.id)).size >= 4,
      60_000,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const again = receiver.accepted('/hook').filter((r) => rows.some((row) => row.id === r.id));
    expect(again).toHaveLength(4);
    expect(arrived.map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    for (const r of again) verified(secret, r);
    // Not before: each was sent again (webhook-timestamp, whole seconds) no earlier than its lease's end.
    for (const r of again)
      expect(Number(r.timestamp)).toBeGreaterThanOrEqual(Math.floor((leases.get(r.id) as number) / 1000));
  }, 120_000);
});
