/**
 * What tracing costs a send, the rest of the send left out (`npx ts-node --transpile-only bench/tracing-cost.ts`):
 * 1. Off: the send path's manual points (`span`, `clientSpan` in src/common/tracing.ts) against calling the step
 *    directly, and against the OpenTelemetry API's own no-op tracer (the points written with `startActiveSpan` and no
 *    SDK). A one-reward send passes 5 such points (insert, token, pacing, the upstream call, the final write).
 * 2. On: the SDK started as the gateway starts it, exporting protobuf to a local receiver (in this process: reading the
 *    bytes is all it does); one send's spans — the request's server span (with its request and response emitters
 *    bound, as the middleware does) and the 5 points under it — made N times; the process's CPU time per send,
 *    export included (the last batch flushed inside the measure).
 */
import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import { SpanKind, context, trace } from '@opentelemetry/api';
import { clientSpan, span, startTracing, stopTracing, tracingEnabled } from '../src/common/tracing';

const N = Number(process.env.BENCH_N ?? 1_000_000);
const ROUNDS = 5;

async function step(): Promise<number> {
  return 1;
}

const noop = trace.getTracer('bench');
const variants: Record<string, () => Promise<number>> = {
  direct: () => step(),
  'span() off': () => span('dispatch.insert', () => step(), { 'dispatch.id': 'x' }),
  'clientSpan() off': () => clientSpan('POST /orders', () => step()),
  'no-op API startActiveSpan': () =>
    noop.startActiveSpan('dispatch.insert', { attributes: { 'dispatch.id': 'x' } }, async (s) => {
      try {
        return await step();
      } finally {
        s.end();
      }
    }),
};

async function main(): Promise<void> {
  await off();
  await on();
}

async function off(): Promise<void> {
  if (tracingEnabled()) throw new Error('tracing must be off for this measure');
  const best: Record<string, number> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, run] of Object.entries(variants)) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < N; i++) await run();
      const ns = Number(process.hrtime.bigint() - t0) / N;
      best[name] = Math.min(best[name] ?? Infinity, ns);
    }
  }
  const direct = best.direct;
  for (const [name, ns] of Object.entries(best))
    process.stdout.write(
      `${name.padEnd(28)} ${ns.toFixed(1).padStart(7)} ns/call  (+${(ns - direct).toFixed(1)} ns over direct)\n`,
    );
  process.stdout.write(
    `a one-reward send (5 points), off: +${(5 * (best['span() off'] - direct)).toFixed(0)} ns; ` +
      `with the no-op API instead: +${(5 * (best['no-op API startActiveSpan'] - direct)).toFixed(0)} ns\n`,
  );
}

/** One send's spans, as the gateway makes them with tracing on. */
async function oneSend(tracer: ReturnType<typeof trace.getTracer>, i: number): Promise<void> {
  const server = tracer.startSpan('POST', {
    kind: SpanKind.SERVER,
    attributes: {
      'http.request.method': 'POST',
      'url.path': '/v1/tenants/bench/rewards',
      'url.scheme': 'http',
      'request.id': `req-${i}`,
    },
  });
  const active = trace.setSpan(context.active(), server);
  context.bind(active, new EventEmitter());
  context.bind(active, new EventEmitter());
  await context.with(active, async () => {
    await span('dispatch.insert', () => step(), { 'tenant.id': 'bench', 'dispatch.id': `d-${i}` });
    await span('token', () => step());
    await span('pacing.wait', () => step());
    await clientSpan(
      'POST /orders',
      async (s) => {
        s.setAttributes({
          'server.address': '127.0.0.1',
          'server.port': 4000,
          'http.response.status_code': 200,
        });
        return step();
      },
      { 'http.request.method': 'POST', 'url.template': '/orders' },
    );
    await span('dispatch.write', () => step(), { 'dispatch.id': `d-${i}` });
  });
  server.setAttributes({ 'http.route': '/v1/tenants/:tenant/rewards', 'http.response.status_code': 201 });
  server.updateName('POST /v1/tenants/:tenant/rewards');
  server.end();
}

async function on(): Promise<void> {
  let bytes = 0;
  let exported = 0;
  const marker = Buffer.from('dispatch.insert');
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      bytes += body.length;
      for (let at = body.indexOf(marker); at >= 0; at = body.indexOf(marker, at + 1)) exported += 1;
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  await startTracing({ protocol: 'http/protobuf' });
  const tracer = trace.getTracer('bench');
  const sends = Number(process.env.BENCH_SENDS ?? 20_000);
  // A real send waits on I/O several times: here one turn of the event loop per send, where the exporter's runs.
  const send = async (i: number) => {
    await oneSend(tracer, i);
    await new Promise((r) => setImmediate(r));
  };
  for (let i = 0; i < 2_000; i++) await send(i); // warm-up
  const best = { cpuUs: Infinity, wallUs: Infinity };
  for (let r = 0; r < 3; r++) {
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < sends; i++) await send(i);
    // The spans still buffered are exported inside the measure (the flush goes through the exporter's HTTP request).
    await (trace.getTracerProvider() as unknown as { getDelegate(): { forceFlush(): Promise<void> } })
      .getDelegate()
      .forceFlush();
    const cpu = process.cpuUsage(cpu0);
    best.cpuUs = Math.min(best.cpuUs, (cpu.user + cpu.system) / sends);
    best.wallUs = Math.min(best.wallUs, Number(process.hrtime.bigint() - t0) / 1000 / sends);
  }
  process.stdout.write(
    `on: ${best.cpuUs.toFixed(1)} µs CPU per send (${best.wallUs.toFixed(1)} µs wall) for its 6 spans, ` +
      `export included; ${exported} of ${2_000 + 3 * sends} sends exported, ${(bytes / 1024 / 1024).toFixed(1)} MiB\n`,
  );
  await stopTracing();
  receiver.close();
}

void main();
