import { connect } from 'node:net';
import type { TestApp } from './support/app';
import { OPERATOR_KEY, startTestApp } from './support/app';
import { DRAIN_MAX_MS } from '../src/common/close-after-answer';

const MiB = 1024 * 1024;

interface RawAnswer {
  /** The status of the answer read, or null when none could be read (a reset, or the connection closed first). */
  status: number | null;
  headers: string;
  body: string;
  /** Whether the whole request went out: a client that sends all of its body before it reads the answer needs it. */
  sent: boolean;
  error?: string;
}

/**
 * A raw HTTP/1.1 exchange over a `net` socket, as a simple client does it: the request's headers and its whole body
 * written (as one `Content-Length` or in chunks), then the answer read. A connection closed with the body unread
 * resets it: the client's writes fail, and the answer may be lost with it.
 */
function rawExchange(
  port: number,
  path: string,
  headers: Record<string, string>,
  bodyBytes: number,
  chunked = false,
): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let sent = false;
    let answered = false;
    let settled = false;
    const done = (error?: string) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      const text = Buffer.concat(received).toString('latin1');
      const head = text.split('\r\n\r\n', 1)[0];
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1];
      resolve({
        status: status ? Number(status) : null,
        headers: head,
        body: text.slice(head.length + 4),
        sent,
        error,
      });
    };
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      // The answer is complete once its Content-Length has arrived.
      const text = Buffer.concat(received).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, end))?.[1];
      answered = end >= 0 && length !== undefined && text.length - end - 4 >= Number(length);
      if (answered && sent) done();
    });
    // The server's end of the connection after its answer: done once the body has gone out too (or failed to).
    socket.on('end', () => (answered ? undefined : done('closed before a complete answer')));
    socket.on('error', (e: NodeJS.ErrnoException) => done(e.code ?? e.message));
    const lines = [
      `POST ${path} HTTP/1.1`,
      'Host: 127.0.0.1',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    lines.push(chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${bodyBytes}`);
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    const body = Buffer.alloc(bodyBytes, 'x');
    body.write('{"rewards":["', 0, 'latin1');
    const last = () => {
      sent = true;
      if (answered) done();
    };
    if (!chunked) socket.write(body, (e) => e || last());
    else {
      for (let at = 0; at < bodyBytes; at += 256 * 1024) {
        const part = body.subarray(at, Math.min(bodyBytes, at + 256 * 1024));
        socket.write(`${part.length.toString(16)}\r\n`);
        socket.write(part);
        socket.write('\r\n');
      }
      socket.write('0\r\n\r\n', (e) => e || last());
    }
  });
}

/**
 * A body past a route's limit is answered, and the answer reaches the client: the connection is not closed with the
 * client's bytes unread (which makes the kernel reset it, losing the answer on its way), but drained for a bounded
 * amount first (common/close-after-answer.ts). Every route with a body limit.
 */
describe('an answer to a refused body always arrives', () => {
  let t: TestApp;
  let port: number;
  const json = { Authorization: `Bearer ${OPERATOR_KEY}`, 'Content-Type': 'application/json' };

  beforeAll(async () => {
    t = await startTestApp({ LOG_LEVEL: 'silent' });
    port = Number(new URL(t.baseUrl).port);
    await fetch(`${t.baseUrl}/v1/tenants`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ id: 'big', name: 'Big' }),
    }).then((r) => expect(r.status).toBe(201));
  });
  afterAll(async () => {
    await t.close();
  });

  const expect413 = (answers: RawAnswer[], message: string) => {
    const outcomes = answers.map((a) => (a.sent ? (a.status ?? a.error) : `not sent: ${a.error}`));
    expect(outcomes).toEqual(answers.map(() => 413));
    for (const a of answers) {
      expect(JSON.parse(a.body)).toEqual({ error: { code: 'payload_too_large', message, details: [] } });
      expect(a.headers).toMatch(/\r\nConnection: close/i);
    }
  };

  it('the send route: a 12 MiB body → 413, 50 times out of 50 (declared length)', async () => {
    const answers: RawAnswer[] = [];
    for (let i = 0; i < 50; i++)
      answers.push(
        await rawExchange(
          port,
          '/v1/tenants/big/rewards',
          { ...json, 'Idempotency-Key': `big-${i}` },
          12 * MiB,
        ),
      );
    expect413(answers, 'The request body is larger than 8 MiB.');
  });

  it('the send route: a 12 MiB body in chunks (no length; refused once 8 MiB are read) → 413, 10 of 10', async () => {
    const answers: RawAnswer[] = [];
    for (let i = 0; i < 10; i++)
      answers.push(
        await rawExchange(
          port,
          '/v1/tenants/big/rewards',
          { ...json, 'Idempotency-Key': `chunked-${i}` },
          12 * MiB,
          true,
        ),
      );
    expect413(answers, 'The request body is larger than 8 MiB.');
  });

  it('another JSON route (1 MiB), the webhook receiver (64 KiB) and the dashboard forms (8 KiB): 413, 10 of 10 each', async () => {
    const routes: [string, Record<string, string>, string][] = [
      ['/v1/tenants', json, 'The request body is larger than 1 MiB.'],
      [
        '/webhooks/rewards/sandbox',
        { 'Content-Type': 'application/json', 'Tremendous-Webhook-Signature': `sha256=${'a'.repeat(64)}` },
        'The webhook body is larger than 64 KiB.',
      ],
      [
        '/ops/connections/00000000-0000-4000-8000-000000000000/check',
        { 'Content-Type': 'application/x-www-form-urlencoded' },
        'The form body is larger than 8 KiB.',
      ],
    ];
    for (const [path, headers, message] of routes) {
      const answers: RawAnswer[] = [];
      for (let i = 0; i < 10; i++)
        answers.push(await rawExchange(port, path, headers, 12 * MiB, i % 2 === 1));
      expect413(answers, message);
    }
  });

  it('a wrong key with a 12 MiB body: the 401 arrives, the body is never parsed', async () => {
    const answers: RawAnswer[] = [];
    for (let i = 0; i < 10; i++)
      answers.push(
        await rawExchange(
          port,
          '/v1/tenants/big/rewards',
          { ...json, Authorization: `Bearer rgo_wrong_${'z'.repeat(40)}`, 'Idempotency-Key': `k-${i}` },
          12 * MiB,
        ),
      );
    expect(answers.map((a) => (a.sent ? (a.status ?? a.error) : `not sent: ${a.error}`))).toEqual(
      answers.map(() => 401),
    );
  });

  it('draining is bounded: a client that keeps sending is cut off after the drain time', async () => {
    // allowHalfOpen: it goes on sending after the answer and the server's end of the connection, as a client busy
    // uploading does (Node's default would end its side at once).
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await new Promise((r) => socket.once('connect', r));
    socket.on('error', () => undefined);
    const received: Buffer[] = [];
    socket.on('data', (c: Buffer) => received.push(c));
    const closed = new Promise((r) => socket.once('close', r));
    const started = Date.now();
    socket.write(
      `POST /v1/tenants/big/rewards HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${OPERATOR_KEY}\r\n` +
        `Content-Type: application/json\r\nIdempotency-Key: slow\r\nContent-Length: ${100 * MiB}\r\n\r\n`,
    );
    // A trickle that would take far longer than the drain time to finish the declared 100 MiB.
    const trickle = setInterval(() => socket.write(Buffer.alloc(1024, 'x')), 50);
    await closed;
    clearInterval(trickle);
    const elapsed = Date.now() - started;
    expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 413 /);
    expect(elapsed).toBeGreaterThanOrEqual(DRAIN_MAX_MS - 100);
    expect(elapsed).toBeLessThan(DRAIN_MAX_MS + 3_000);
  }, 20_000);
});
