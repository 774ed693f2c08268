/**
 * A reference point for `npm run bench`: the least an exactly-once proxy must do per send, with no framework, no
 * validation beyond the key, no caches: read the request; INSERT the dispatch and its reward row (the gateway's
 * tables, synchronous commit: durable before the call) keyed by the Idempotency-Key; POST the order upstream with a
 * stable external_id; UPDATE both rows as sent; answer. The gateway's throughput and CPU per send are reported
 * against this floor.
 *
 * Env: PORT, UPSTREAM_URL, DATABASE_URL, ACCOUNT_KEY (a static upstream key), TENANT_ID (an existing tenant).
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Pool } from 'pg';
import { Agent, request } from 'undici';

const upstream = process.env.UPSTREAM_URL as string;
const accountKey = process.env.ACCOUNT_KEY as string;
const tenantId = process.env.TENANT_ID as string;
const agent = new Agent({ keepAliveTimeout: 4_000, connections: 64 });
const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });

interface SendBody {
  rewards: {
    recipient: { name: string; email: string };
    value: { denomination: number; currency_code: string };
    products: string[];
  }[];
}

async function handle(key: string, body: SendBody): Promise<{ status: number; json: unknown }> {
  const id = randomUUID();
  const r = body.rewards[0];
  const reward = {
    value: r.value,
    delivery: { method: 'EMAIL' },
    recipient: r.recipient,
    products: r.products,
    custom_fields: [{ id: 'FLDDEPARTMENT', value: 'Sales' }],
  };
  const inserted = await pool.query({
    name: 'floor_insert',
    text: `WITH d AS (
             INSERT INTO reward_dispatches (id, tenant_id, connection_id, environment, order_shape, idempotency_key, request_hash, request,
                                            upstream_payload, status, attempts, lease_until)
             VALUES ($1, $2, NULL, 'sandbox', 'single', $3, $4, '{}', $5, 'sending', 1, now() + interval '60 seconds')
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id)
           INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload, attempts)
           SELECT d.id, 0, $6, 'sending', $7, 1 FROM d RETURNING dispatch_id`,
    values: [
      id,
      tenantId,
      key,
      '0'.repeat(64),
      { payment: { funding_source_id: 'FSDEMOMAIN' } },
      `${id}-r0`,
      reward,
    ],
  });
  if (inserted.rowCount === 0) return { status: 409, json: { error: 'key in use' } };
  const res = await request(`${upstream}/api/v2/orders`, {
    method: 'POST',
    headers: { authorization: `Bearer ${accountKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ external_id: `${id}-r0`, payment: { funding_source_id: 'FSDEMOMAIN' }, reward }),
    dispatcher: agent,
  });
  const order = (await res.body.json()) as { order?: { id: string; rewards: { id: string }[] } };
  if (res.statusCode >= 300 || !order.order)
    return { status: 502, json: { error: `upstream ${res.statusCode}` } };
  await pool.query({
    name: 'floor_sent',
    text: `WITH r AS (UPDATE dispatch_rewards SET status = 'sent', upstream_order_id = $2, upstream_reward_id = $3, sent_at = now()
                       WHERE dispatch_id = $1 AND position = 0)
           UPDATE reward_dispatches SET status = 'sent', response_status = 201, lease_until = NULL, sent_at = now() WHERE id = $1`,
    values: [id, order.order.id, order.order.rewards[0]?.id ?? null],
  });
  return { status: 201, json: { id, status: 'sent', upstream_order_id: order.order.id } };
}

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || !key) {
      res.writeHead(400).end();
      return;
    }
    handle(key, JSON.parse(Buffer.concat(chunks).toString('utf8')) as SendBody).then(
      ({ status, json }) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json)),
      () => res.writeHead(500).end(),
    );
  });
}).listen(Number(process.env.PORT), '127.0.0.1');
