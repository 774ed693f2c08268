import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type Attributes,
  type Context,
  type DiagLogger,
  DiagLogLevel,
  diag,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  type SpanOptions,
  SpanStatusCode,
  type Tracer,
  context,
  propagation,
  trace,
} from '@opentelemetry/api';
import type { TracingConfig } from '../config/app-config';
import { redactUrl } from './logging';
import { requestIdOf } from './request-id';
import { withTimeout } from './schedule';

/**
 * OpenTelemetry tracing, all of it: the SDK's start and stop, the request's server span, and `span` / `rootSpan` for
 * the few manual points (the send path's steps, the background work). Nothing is patched: no auto-instrumentation,
 * only spans made here. Off (no OTLP endpoint), the SDK is never loaded, the request middleware and the log mixin
 * are not installed, and `span` runs its function with a shared non-recording span after one null check.
 *
 * Never recorded: tokens, keys, request or response bodies, recipients' data, query strings. Attributes are ids
 * (tenant, dispatch, connection), routes, HTTP methods and status codes, and our error codes.
 */

let tracer: Tracer | null = null;
let stop: (() => Promise<void>) | null = null;

/** The span `span()` hands out while tracing is off: records nothing, costs nothing. */
const OFF = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

export function tracingEnabled(): boolean {
  return tracer !== null;
}

/**
 * Starts the SDK: the OTLP/HTTP exporter of the configured protocol (the endpoint, headers, timeout and compression
 * from the standard OTEL_EXPORTER_OTLP_* variables), a batch span processor (OTEL_BSP_*), the sampler of
 * OTEL_TRACES_SAMPLER (default: parent-based, always on), the resource from OTEL_SERVICE_NAME and
 * OTEL_RESOURCE_ATTRIBUTES (service name `rewards-gateway` when unset), W3C trace context, and the AsyncLocalStorage
 * context manager. Call once, before the app is built (main.ts).
 */
export async function startTracing(config: TracingConfig): Promise<void> {
  if (tracer) return;
  const [{ NodeTracerProvider, BatchSpanProcessor }, resources, exporters] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    config.protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http')
      : import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': SERVICE_NAME }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new exporters.OTLPTraceExporter())],
  });
  diag.setLogger(sdkProblems(), DiagLogLevel.WARN);
  provider.register();
  tracer = trace.getTracer(SERVICE_NAME);
  stop = () => provider.shutdown();
}

/**
 * The SDK's own warnings and errors (a collector unreachable, spans dropped from a full queue) as JSON log lines on
 * stdout, like the app's (pino's levels: 40 warn, 50 error); the same message at most once a minute.
 */
function sdkProblems(): DiagLogger {
  const lastSaid = new Map<string, number>();
  const say =
    (level: number) =>
    (message: string, ...args: unknown[]) => {
      const now = Date.now();
      if (now - (lastSaid.get(message) ?? -Infinity) < 60_000) return;
      if (lastSaid.size > 100) lastSaid.clear();
      lastSaid.set(message, now);
      const detail = args
        .map((a) => (a instanceof Error ? a.message : typeof a === 'string' ? a : ''))
        .filter(Boolean);
      process.stdout.write(
        `${JSON.stringify({ level, time: now, context: 'OpenTelemetry', msg: [message, ...detail].join(' ') })}\n`,
      );
    };
  const quiet = () => undefined;
  return { error: say(50), warn: say(40), info: quiet, debug: quiet, verbose: quiet };
}

/** How long a stop waits for the last spans to go out (a collector that is down must not hold the stop). */
const STOP_WAIT_MS = 3_000;

/** Sends the spans still buffered and stops the SDK (the process is stopping). Never throws; waits 3 s at most. */
export async function stopTracing(): Promise<void> {
  const shutdown = stop;
  tracer = null;
  stop = null;
  if (shutdown) await withTimeout(shutdown(), STOP_WAIT_MS, 'spans not sent').catch(() => undefined);
}

const SERVICE_NAME = 'rewards-gateway';

type Spanned = <T>(name: string, fn: (span: Span) => Promise<T>, attributes?: Attributes) => Promise<T>;

/** A kind of span: runs `fn` in it, or with the shared non-recording span while tracing is off. */
const spanning =
  (options: SpanOptions): Spanned =>
  (name, fn, attributes) =>
    tracer === null
      ? fn(OFF)
      : tracer.startActiveSpan(name, { ...options, attributes }, (s) => settle(s, fn));

/**
 * Runs `fn` in a child span of the active one (`name`: a fixed step name, never data). A thrown error marks the
 * span with its code (`error.type`: our error code or the error's class), never its message.
 */
export const span = spanning({});
/** Like `span`, as the root of a trace of its own: a background job's unit of work (a dispatch slice, a delivery). */
export const rootSpan = spanning({ root: true });
/** A client span (an outbound HTTP call) under the active span. */
export const clientSpan = spanning({ kind: SpanKind.CLIENT });

async function settle<T>(s: Span, fn: (span: Span) => Promise<T>): Promise<T> {
  try {
    return await fn(s);
  } catch (error) {
    s.setAttribute('error.type', errorType(error));
    s.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    s.end();
  }
}

/** Our error code (`AppError.code`), a rewards-service error's kind, or the error's class: never its message. */
function errorType(error: unknown): string {
  const { code, kind } = (error ?? {}) as { code?: unknown; kind?: unknown };
  for (const value of [code, kind])
    if (typeof value === 'string' && /^[a-z0-9_.]{1,64}$/i.test(value)) return value;
  return error instanceof Error ? error.constructor.name : 'error';
}

/** Paths with no server span: the emulator's own traffic, health checks, scrapes. */
const UNTRACED = /^\/(?:sandbox(?:\/|$)|health\/|metrics(?:$|\?))/;

/** The request's trace context, kept on the request for `continueTrace`. */
const REQUEST_CONTEXT = Symbol('trace context');

/**
 * The app's first step when tracing is on (app.factory.ts): one SERVER span per request, continuing the caller's W3C
 * `traceparent`, active for the request (and again after its body is read: `continueTrace`). Named
 * `METHOD /route/:param` once the route is known; attributes: method, path (a connect link's token masked, never the
 * query string), route, status code, request id.
 */
export function traceRequests(
  req: IncomingMessage,
  res: ServerResponse,
  next: () => void,
  routeOf: () => string | undefined,
): void {
  const url = req.url ?? '/';
  if (tracer === null || UNTRACED.test(url)) return next();
  const method = req.method ?? 'GET';
  const parent = propagation.extract(ROOT_CONTEXT, req.headers);
  const s = tracer.startSpan(
    method,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': method,
        'url.path': redactUrl(url.split('?')[0]),
        'url.scheme': 'http',
        'request.id': requestIdOf(req),
      },
    },
    parent,
  );
  const active = trace.setSpan(parent, s);
  (req as { [REQUEST_CONTEXT]?: Context })[REQUEST_CONTEXT] = active;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    const route = routeOf();
    if (typeof route === 'string') {
      s.setAttribute('http.route', route);
      s.updateName(`${method} ${route}`);
    }
    s.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500) s.setStatus({ code: SpanStatusCode.ERROR });
    if (!res.writableFinished) s.setAttribute('error.type', 'client_closed');
    s.end();
  };
  res.once('finish', end);
  res.once('close', end);
  context.with(active, next);
}

/**
 * After the body readers: a body is read in the socket's callbacks, outside the request's context; this puts the rest
 * of the request (the framework's pipeline, the route) back inside it. Cheaper than binding the request's and the
 * response's emitters, which wraps every listener of both.
 */
export function continueTrace(req: IncomingMessage, next: () => void): void {
  const active = (req as { [REQUEST_CONTEXT]?: Context })[REQUEST_CONTEXT];
  if (active) context.with(active, next);
  else next();
}

/** The pino mixin when tracing is on: every log line written inside a span carries its trace and span ids. */
export function traceLogFields(): Record<string, string> {
  const active = trace.getActiveSpan();
  if (!active) return {};
  const { traceId, spanId } = active.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
