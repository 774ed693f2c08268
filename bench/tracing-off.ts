/**
 * What tracing costs a send while it is off: the send path's manual points (`span`, `clientSpan` in
 * src/common/tracing.ts) against calling the step directly, and against the OpenTelemetry API's own no-op tracer (what
 * the points would cost written with `startActiveSpan` and no SDK). A one-reward send passes 5 such points (insert,
 * token, pacing, the upstream call, the final write). Run: `npx ts-node --transpile-only bench/tracing-off.ts`.
 */
import { trace } from '@opentelemetry/api';
import { clientSpan, span, tracingEnabled } from '../src/common/tracing';

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

void main();
