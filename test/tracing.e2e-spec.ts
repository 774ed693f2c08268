import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { freePort } from './support/app';
import { createConnectedTenant } from './support/connect';
import { createTestDatabase } from './support/database';
import { type MainProcess, runSrc } from './support/main-process';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from './support/otlp-receiver';
import { type RunningSandbox, startSandbox } from './support/sandbox';
import { waitFor } from './support/send';
import { WebhookReceiver } from './support/webhook-receiver';

const OPERATOR = `rgo_trace_${'t'.repeat(30)}`;
const RECIPIENT_EMAIL = 'traced.recipient@example.com';
const SERVER = 2;
const CLIENT = 3;

/**
 * At exit, the gateway process says which OpenTelemetry packages it loaded, whether the trace API records, and whether
 * node:http was patched: the proof that, unset, tracing is off and free (loaded with NODE_OPTIONS=--require).
 */
const PROBE = `
const http = require('node:http');
const original = { request: http.request, get: http.get };
const ownEmit = () => Object.prototype.hasOwnProperty.call(http.Server.prototype, 'emit');
const emitBefore = ownEmit();
process.on('exit', () => {
  const packages = [...new Set(Object.keys(require.cache)
    .map((p) => /node_modules[\\\\/](@opentelemetry[\\\\/][^\\\\/]+)/.exec(p)?.[1])
    .filter(Boolean))].sort();
  const api = require(${JSON.stringify(require.resolve('@opentelemetry/api'))});
  const recording = api.trace.getTracer('probe').startSpan('probe').isRecording();
  // What an HTTP instrumentation would wrap: the server's emit (an own property then) and the client functions.
  const patched = Object.keys(original).filter((k) => http[k] !== original[k] || http[k].__wrapped);
  if (ownEmit() !== emitBefore) patched.push('Server.prototype.emit');
  process.stderr.write('\\nOTEL_PROBE ' + JSON.stringify({ packages, recording, patched }) + '\\n');
});
`;

/** `a` ended before `b` started (a span's start is in whole milliseconds, its end is precise: 1 ms of slack). */
const before = (a: ReceivedSpan, b: ReceivedSpan) => a.endNs <= b.startNs + 1_000_000n;

interface Probe {
  packages: string[];
  recording: boolean;
  patched: string[];
}

/**
 * OpenTelemetry over real HTTP and Postgres: the gateway as its own process exporting to a local OTLP receiver; one
 * send (through a 401 and a token refresh) is one trace — the request's server span, the idempotency insert, the token,
 * the pacing wait, the upstream calls, the final write — linked to its log lines, with no secret or e-mail in any
 * attribute. Without an endpoint: no SDK loaded, nothing patched, the API records nothing.
 */
describe('OpenTelemetry traces', () => {
  let sandbox: RunningSandbox;
  let receiver: OtlpReceiver;
  let db: { url: string; drop: () => Promise<void> };
  let probeFile: string;
  let ports: number[];
  const vaultKeys = `trace:${randomBytes(32).toString('base64')}`;
  const running: MainProcess[] = [];

  const gateway = async (port: number, extra: Record<string, string>): Promise<MainProcess> => {
    const base = `http://127.0.0.1:${port}`;
    const p = runSrc('main.ts', {
      DATABASE_URL: db.url,
      PORT: String(port),
      PUBLIC_BASE_URL: base,
      OPERATOR_API_KEY: OPERATOR,
      VAULT_KEYS: vaultKeys,
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-trace-')),
      REWARDS_SANDBOX_BASE_URL: sandbox.baseUrl,
      REWARDS_SANDBOX_CLIENT_ID: 'test-client',
      REWARDS_SANDBOX_CLIENT_SECRET: 'test-secret-value',
      DELIVERY_WEBHOOKS_REGISTER: 'false',
      OPS_PROBE_INTERVAL_MS: '0',
      LOG_LEVEL: 'info',
      NODE_OPTIONS: `--require ${probeFile}`,
      ...extra,
    });
    running.push(p);
    await waitFor(
      async () => {
        if (p.child.exitCode !== null) throw new Error(`gateway exited: ${p.output().slice(-2000)}`);
        return fetch(`${base}/health/ready`).then(
          (r) => r.status,
          () => 0,
        );
      },
      (status) => status === 200,
      60_000,
    );
    return p;
  };
  const api =
    (base: string) =>
    (route: string, init: RequestInit = {}) =>
      fetch(`${base}${route}`, {
        ...init,
        headers: {
          Authorization: `Bearer ${OPERATOR}`,
          'Content-Type': 'application/json',
          ...(init.headers ?? {}),
        },
      });
  const stop = async (p: MainProcess): Promise<Probe> => {
    p.child.kill('SIGTERM');
    await p.exited;
    const line = /OTEL_PROBE (.+)/.exec(p.output())?.[1];
    if (!line) throw new Error(`no probe line: ${p.output().slice(-2000)}`);
    return JSON.parse(line) as Probe;
  };
  const sendOne = (base: string, key: string, requestId: string) =>
    api(base)('/v1/tenants/traced/rewards', {
      method: 'POST',
      headers: { 'Idempotency-Key': key, 'X-Request-Id': requestId },
      body: JSON.stringify({
        rewards: [
          {
            recipient: { name: 'Traced Recipient', email: RECIPIENT_EMAIL },
            value: { denomination: 10, currency_code: 'USD' },
            products: ['PRODAMAZONUS'],
            custom_fields: { Department: 'Sales' },
          },
        ],
      }),
    });
  /** The gateway's JSON log lines. */
  const logLines = (p: MainProcess) =>
    p
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rg-otel-probe-'));
    probeFile = path.join(dir, 'probe.js');
    writeFileSync(probeFile, PROBE);
    receiver = await startOtlpReceiver();
    ports = [await freePort(), await freePort(), await freePort(), await freePort()];
    sandbox = await startSandbox(ports.map((port) => `http://127.0.0.1:${port}/oauth/callback`));
    db = await createTestDatabase();
  }, 180_000);

  afterAll(async () => {
    for (const p of running)
      if (p.child.exitCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    await receiver.close();
    await sandbox.close();
    await db.drop();
  });

  it('a send is one trace: server span, insert, token (a 401 and a refresh), pacing, upstream calls, final write', async () => {
    const port = ports[0];
    const base = `http://127.0.0.1:${port}`;
    const p = await gateway(port, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: 'rg-traced',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      // The account is paced (its slot is a span of the send), as in production.
      REWARDS_SANDBOX_RATE_LIMIT_RPS: '10',
      // Two rewards make a batch, sent by the worker: background work.
      DISPATCH_INLINE_MAX_REWARDS: '1',
      // The tenant's webhook endpoint is on this machine: deliveries are background work too.
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_POLL_MS: '100',
    });
    sandbox.state.settings.autoApprove = true;
    await createConnectedTenant(api(base), 'traced');
    const hooks = await new WebhookReceiver().start();
    const endpoint = await api(base)('/v1/tenants/traced/webhooks', {
      method: 'POST',
      body: JSON.stringify({ url: hooks.url('/hooks?token=endpoint-secret'), events: ['reward.sent'] }),
    });
    expect(endpoint.status).toBe(201);
    const endpointSecret = ((await endpoint.json()) as { secret: string }).secret;
    // Every access token the service issued is forgotten: the send's first call gets a 401, refreshes, and retries.
    const secrets = [
      OPERATOR,
      endpointSecret,
      'endpoint-secret',
      'test-secret-value',
      ...sandbox.state.accessTokens.keys(),
      ...sandbox.state.refreshTokens.keys(),
    ];
    sandbox.state.accessTokens.clear();

    const res = await sendOne(base, 'trace-1', 'trace-send-1');
    const body = (await res.json()) as { id: string; status: string };
    expect({ status: res.status, dispatch: body.status }).toEqual({ status: 201, dispatch: 'sent' });
    secrets.push(...sandbox.state.accessTokens.keys(), ...sandbox.state.refreshTokens.keys());

    const server: ReceivedSpan = (await waitFor(
      async () =>
        receiver.spans.find((s) => s.kind === SERVER && s.attributes['request.id'] === 'trace-send-1'),
      (s) => s !== undefined,
      30_000,
    )) as ReceivedSpan;
    // Every span of the trace (the write ends last; the exporter sends in batches).
    const trace = (
      await waitFor(
        async () => receiver.spans.filter((s) => s.traceId === server!.traceId),
        (spans) => spans.some((s) => s.name === 'dispatch.write'),
        30_000,
      )
    ).sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
    expect(server).toMatchObject({
      name: 'POST /v1/tenants/:tenant/rewards',
      parentSpanId: '',
      attributes: {
        'http.request.method': 'POST',
        'http.route': '/v1/tenants/:tenant/rewards',
        'url.path': '/v1/tenants/traced/rewards',
        'http.response.status_code': 201,
      },
      resource: { 'service.name': 'rg-traced' },
    });
    const named = (name: string) => trace.filter((s) => s.name === name);
    const [insert] = named('dispatch.insert');
    expect(insert.attributes).toMatchObject({ 'dispatch.id': body.id, 'tenant.id': 'traced' });
    const tokens = named('token');
    const pacing = named('pacing.wait');
    const [refresh] = named('POST /oauth/token');
    const [order] = named('POST /orders');
    const [write] = named('dispatch.write');
    // The upstream calls of the send (the account's fields, first seen here, then the order), each after its token and
    // its pacing slot; the first got a 401: the token was refreshed (under a second token span) and the call retried.
    const calls = trace.filter((s) => s.kind === CLIENT && s !== refresh);
    expect(calls.map((c) => [c.name, c.attributes['http.response.status_code'], c.statusCode])).toEqual([
      ['GET /fields', 401, 2],
      ['GET /fields', 200, 0],
      ['POST /orders', 200, 0],
    ]);
    // Before each call (since the one before it), a token span and a pacing span: the token read, or after the 401
    // the one that refreshed it (the only token span marked so), and the account's slot.
    const [after401] = tokens.filter((t) => t.attributes['token.after_401'] === true);
    expect(tokens.filter((t) => t.attributes['token.after_401'] === true)).toHaveLength(1);
    expect(refresh).toMatchObject({ kind: CLIENT, attributes: { 'http.response.status_code': 200 } });
    expect(refresh.parentSpanId).toBe(after401.spanId);
    expect(before(calls[0], after401) && before(after401, calls[1])).toBe(true);
    calls.forEach((call, i) => {
      const since = (s: ReceivedSpan) => i === 0 || before(calls[i - 1], s);
      expect(tokens.some((t) => since(t) && before(t, call))).toBe(true);
      expect(pacing.some((t) => since(t) && before(t, call))).toBe(true);
    });
    expect(order.attributes).toMatchObject({ 'http.request.method': 'POST', 'url.template': '/orders' });
    // The steps are children of the request's span, in order.
    for (const s of [insert, ...tokens, ...pacing, ...calls, write])
      expect(s.parentSpanId).toBe(server.spanId);
    expect(before(insert, order)).toBe(true);
    expect(before(order, write)).toBe(true);
    expect(write.attributes).toMatchObject({ 'dispatch.id': body.id });
    // One trace for the send: its insert appears once, in this trace only.
    expect(
      receiver.spans.filter((s) => s.attributes['dispatch.id'] === body.id && s.name === 'dispatch.insert'),
    ).toHaveLength(1);

    // The send's log lines carry its trace id (the request log: the span of the request).
    await new Promise((r) => setTimeout(r, 300));
    const lines = logLines(p).filter((l) => (l.req as { id?: string } | undefined)?.id === 'trace-send-1');
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l).toMatchObject({ trace_id: server.traceId, span_id: server.spanId });

    // Background work has traces of its own; none of the send's spans is a root but the request.
    expect(trace.filter((s) => s.parentSpanId === '')).toEqual([server]);

    // A batch is answered at once and sent by the worker: a trace of its own, rooted in the worker's attempt.
    const batch = await api(base)('/v1/tenants/traced/rewards', {
      method: 'POST',
      headers: { 'Idempotency-Key': 'trace-batch', 'X-Request-Id': 'trace-batch-1' },
      body: JSON.stringify({
        rewards: [1, 2].map((n) => ({
          recipient: { name: `Batch ${n}`, email: `batch${n}.${RECIPIENT_EMAIL}` },
          value: { denomination: 5, currency_code: 'USD' },
          products: ['PRODAMAZONUS'],
          custom_fields: { Department: 'Sales' },
        })),
      }),
    });
    const queued = (await batch.json()) as { id: string };
    expect(batch.status).toBe(202);
    const attempt = (await waitFor(
      async () =>
        receiver.spans.find(
          (s) => s.name === 'dispatch.worker_attempt' && s.attributes['dispatch.id'] === queued.id,
        ),
      (s) => s !== undefined,
      30_000,
    )) as ReceivedSpan;
    expect(attempt).toMatchObject({
      parentSpanId: '',
      attributes: { 'tenant.id': 'traced', 'dispatch.priority': 'bulk' },
    });
    const batchRequest = receiver.spans.find(
      (s) => s.kind === SERVER && s.attributes['request.id'] === 'trace-batch-1',
    );
    expect(batchRequest?.traceId).not.toBe(attempt.traceId);
    const background = await waitFor(
      async () => receiver.spans.filter((s) => s.traceId === attempt.traceId && s.name === 'POST /orders'),
      (spans) => spans.length === 2,
      30_000,
    );
    for (const s of background) expect(s.parentSpanId).toBe(attempt.spanId);

    // Each tenant-webhook delivery is a trace of its own, saying how it went (not where to, nor what).
    const delivery = (await waitFor(
      async () => receiver.spans.find((s) => s.name === 'webhook.delivery'),
      (s) => s !== undefined,
      30_000,
    )) as ReceivedSpan;
    expect(delivery).toMatchObject({
      parentSpanId: '',
      attributes: { 'tenant.id': 'traced', 'webhook.outcome': 'delivered', 'http.response.status_code': 200 },
    });
    expect(hooks.received.length).toBeGreaterThan(0);
    await hooks.stop();

    // No secret, no e-mail, no query string in any attribute of any span (the connect flow's callback included).
    const everything = JSON.stringify(
      receiver.spans.map((s) => [s.name, s.attributes, s.resource]),
      (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v),
    );
    expect(receiver.spans.some((s) => s.name === 'GET /oauth/callback')).toBe(true);
    for (const secret of secrets) expect(everything).not.toContain(secret);
    expect(everything).not.toContain('@');
    expect(everything).not.toContain('Bearer');
    expect(everything).not.toMatch(/[?&](code|state)=/);
    expect(receiver.requests.every((r) => r.path === '/v1/traces')).toBe(true);
    expect(receiver.requests[0].contentType).toBe('application/x-protobuf');

    const probe = await stop(p);
    expect(probe.packages).toEqual(expect.arrayContaining(['@opentelemetry/sdk-trace-node']));
  }, 180_000);

  it('exports OTLP/JSON when OTEL_EXPORTER_OTLP_PROTOCOL=http/json; continues the caller’s traceparent', async () => {
    const port = ports[2];
    const p = await gateway(port, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'rg-json',
      OTEL_BSP_SCHEDULE_DELAY: '200',
    });
    // The caller's W3C trace context is continued.
    const callerTrace = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const res = await api(`http://127.0.0.1:${port}`)('/v1/tenants/traced/connection', {
      headers: { 'X-Request-Id': 'json-1', traceparent: `00-${callerTrace}-${callerSpan}-01` },
    });
    expect(res.status).toBe(200);
    const server = await waitFor(
      async () => receiver.spans.find((s) => s.attributes['request.id'] === 'json-1'),
      (s) => s !== undefined,
      30_000,
    );
    expect(server).toMatchObject({
      kind: SERVER,
      name: 'GET /v1/tenants/:tenant/connection',
      traceId: callerTrace,
      parentSpanId: callerSpan,
      resource: { 'service.name': 'rg-json' },
    });
    expect(receiver.requests.some((r) => r.contentType === 'application/json')).toBe(true);
    await stop(p);
  }, 180_000);

  it('a collector that is down: sends go on; the export failure is logged, once a minute at most', async () => {
    const port = ports[3];
    const closed = await freePort();
    const p = await gateway(port, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${closed}`,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      // The exporter retries a refused connection with backoff until its timeout (10 s by default) before it reports
      // the failure: 1 s reports it sooner, and more failures then fall in the once-a-minute window checked below.
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      REWARDS_SANDBOX_RATE_LIMIT_RPS: '0',
    });
    for (const n of [1, 2, 3])
      expect((await sendOne(`http://127.0.0.1:${port}`, `down-${n}`, `down-${n}`)).status).toBe(201);
    await waitFor(
      async () => logLines(p).filter((l) => l.context === 'OpenTelemetry'),
      (lines) => lines.length > 0,
      30_000,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const problems = logLines(p).filter((l) => l.context === 'OpenTelemetry');
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ level: 50 });
    // The stop does not wait on the collector for long.
    const stopping = Date.now();
    await stop(p);
    expect(Date.now() - stopping).toBeLessThan(10_000);
  }, 180_000);

  it('without an endpoint: no SDK loaded, nothing patched, no span recorded, no trace id in the logs', async () => {
    const port = ports[1];
    const base = `http://127.0.0.1:${port}`;
    const exported = receiver.requests.length;
    const p = await gateway(port, { OTEL_SERVICE_NAME: 'rg-untraced', REWARDS_SANDBOX_RATE_LIMIT_RPS: '0' });
    const res = await sendOne(base, 'untraced-1', 'untraced-send-1');
    expect(res.status).toBe(201);
    await new Promise((r) => setTimeout(r, 500));
    const probe = await stop(p);
    expect(probe).toEqual({ packages: ['@opentelemetry/api'], recording: false, patched: [] });
    const lines = logLines(p);
    expect(lines.some((l) => (l.req as { id?: string } | undefined)?.id === 'untraced-send-1')).toBe(true);
    expect(lines.filter((l) => 'trace_id' in l || 'span_id' in l)).toEqual([]);
    expect(receiver.requests.length).toBe(exported);
  }, 180_000);
});
