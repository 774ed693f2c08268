/**
 * Bench section "pacing" (issue 15): 10,000 rewards over 20 tenants, each on its own account, with the sandbox
 * enforcing 10 requests in any 1-second interval per account (as the service does) and the gateway pacing at the same
 * 10. Measures: time against the ideal (500 rewards / 10 per second = 50 s), 429s returned, the most requests any
 * account saw in 1 s, interactive single sends on the busy tenants meanwhile (p50/p99), the gateway's RSS before,
 * during and after, and database round-trips per reward (pg_stat_statements, when available).
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { demoSeed } from '../src/sandbox/sandbox.seed';

export const PACING_TENANTS = 20;
const PER_TENANT = 500;
const RPS = 10;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface PacingDeps {
  operator: string;
  dbUrl: string;
  statStatements: boolean;
  /** Starts the sandbox (limit on) and one gateway (pacing on) on free ports; returns their URLs and pids. */
  start(): Promise<{ sandboxUrl: string; gatewayUrl: string; gateway: ChildProcess }>;
  connect(gateway: string, tenant: string): Promise<string>;
  log(message: string): void;
}

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** An account like the demo one (its fields, products and funding), under its own id and key. */
/** The gateway's live JS heap (prom-client's default metric), to tell memory in use from what V8 keeps. */
async function heapUsedMb(gatewayUrl: string): Promise<number> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  return Number(/^rg_nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? NaN) / 1024 / 1024;
}

const seedAccount = (i: number) => ({
  ...demoSeed()[0],
  id: `acc_p${i}`,
  name: `Pacing ${i}`,
  api_key: `sbx_pacing_bench_${String(i).padStart(2, '0')}_${'k'.repeat(20)}`,
});

const reward = (tenant: number, i: number) => ({
  recipient: { name: `P${tenant} ${i}`, email: `p${tenant}-${i}@example.com` },
  value: { denomination: 5, currency_code: 'USD' },
  products: ['PRODAMAZONUS'],
  custom_fields: { Department: 'Sales' },
});

export async function pacingRun(deps: PacingDeps) {
  const { sandboxUrl, gatewayUrl, gateway } = await deps.start();
  const control = async (p: string, body?: unknown) => {
    const res = await fetch(`${sandboxUrl}/__control${p}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`sandbox ${p}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Json;
  };
  const api = async (p: string, body?: unknown, key?: string) => {
    const res = await fetch(`${gatewayUrl}${p}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        Authorization: `Bearer ${deps.operator}`,
        'Content-Type': 'application/json',
        ...(key ? { 'Idempotency-Key': key } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  await control('/reset', { accounts: Array.from({ length: PACING_TENANTS }, (_, i) => seedAccount(i)) });
  await control('/settings', { auto_approve: true, rate_limit_rps: 0 });
  for (let i = 0; i < PACING_TENANTS; i++) {
    await control('/settings', { auto_approve_account_id: `acc_p${i}` });
    await deps.connect(gatewayUrl, `pace-${i}`);
  }
  // Warm the caches (fields, tokens) with one interactive send per tenant, then the limit goes on.
  for (let i = 0; i < PACING_TENANTS; i++) {
    const res = await api(`/v1/tenants/pace-${i}/rewards`, { rewards: [reward(i, -1)] }, `pace-warm-${i}`);
    if (res.status !== 201)
      throw new Error(`warm-up send answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
  await control('/settings', { rate_limit_rps: RPS });
  const before429 = (await control('/stats')).rate_limit as Json;

  const db = new Client({ connectionString: deps.dbUrl });
  await db.connect();
  const calls = async () =>
    deps.statStatements
      ? Number(
          (
            await db.query(
              `SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
                WHERE d.datname = current_database() AND query NOT ILIKE '%pg_stat_statements%'`,
            )
          ).rows[0].n,
        )
      : NaN;
  await new Promise((r) => setTimeout(r, 1_000));
  const rssBefore = rssMb(gateway.pid as number);
  const heapBefore = await heapUsedMb(gatewayUrl);
  const callsBefore = await calls();

  const pgStart = (await db.query<{ t: Date }>(`SELECT clock_timestamp() AS t`)).rows[0].t.getTime();
  const started = performance.now();
  const submitted = await Promise.all(
    Array.from({ length: PACING_TENANTS }, (_, t) =>
      api(
        `/v1/tenants/pace-${t}/rewards`,
        { rewards: Array.from({ length: PER_TENANT }, (_, i) => reward(t, i)) },
        `pace-batch-${t}`,
      ),
    ),
  );
  const submitMs = performance.now() - started;
  for (const s of submitted)
    if (s.status !== 202)
      throw new Error(`batch answered ${s.status}: ${JSON.stringify(s.body).slice(0, 300)}`);
  deps.log(`pacing: 20 batches of ${PER_TENANT} accepted in ${submitMs.toFixed(0)} ms`);

  // Meanwhile: one interactive send every 250 ms, round-robin over the busy tenants; RSS every second.
  const interactive: number[] = [];
  /** Interactive sends not answered `sent` (201), by the reason they were queued or refused. */
  const notSent: Record<string, number> = {};
  const rss: number[] = [];
  const heap: number[] = [];
  let done = false;
  const finished = new Map<number, number>();
  const sampler = (async () => {
    let n = 0;
    while (!done) {
      const t = n % PACING_TENANTS;
      const t0 = performance.now();
      const res = await api(
        `/v1/tenants/pace-${t}/rewards`,
        { rewards: [reward(t, 10_000 + n)] },
        `pace-i-${n}`,
      );
      interactive.push(performance.now() - t0);
      if (res.status !== 201) {
        const code = String(res.body?.last_error?.code ?? res.body?.error?.code ?? res.status);
        notSent[code] = (notSent[code] ?? 0) + 1;
      }
      if (n % 4 === 0) {
        rss.push(rssMb(gateway.pid as number));
        heap.push(await heapUsedMb(gatewayUrl));
      }
      n += 1;
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  // Finish times from Postgres (the settle's updated_at), polled cheaply: the bench does not load the gateway itself.
  while (finished.size < PACING_TENANTS) {
    await new Promise((r) => setTimeout(r, 250));
    const { rows } = await db.query<{ key: string; status: string; at: Date }>(
      `SELECT idempotency_key AS key, status, updated_at AS at FROM reward_dispatches WHERE idempotency_key LIKE 'pace-batch-%'`,
    );
    for (const r of rows) {
      const t = Number(r.key.slice('pace-batch-'.length));
      if (finished.has(t) || r.status === 'queued' || r.status === 'sending') continue;
      if (r.status !== 'sent') {
        const view = await api(`/v1/tenants/pace-${t}/dispatches/${submitted[t].body.id}`);
        throw new Error(
          `batch ${t} ended ${r.status}: ${JSON.stringify(view.body.last_error)} counts ${JSON.stringify(view.body.counts)} first reward error ${JSON.stringify(view.body.rewards?.[0]?.error)}`,
        );
      }
      finished.set(t, r.at.getTime() - pgStart);
    }
    if (performance.now() - started > 300_000) throw new Error('pacing batches did not finish in 300 s');
  }
  done = true;
  await sampler;
  const totalMs = Math.max(...finished.values());
  const callsDuring = (await calls()) - callsBefore;
  await new Promise((r) => setTimeout(r, 5_000));
  const rssAfter = rssMb(gateway.pid as number);
  const heapAfter = await heapUsedMb(gatewayUrl);
  await db.end();

  const stats = (await control('/stats')).rate_limit as Json;
  let rejected = 0;
  let maxIn1s = 0;
  for (let i = 0; i < PACING_TENANTS; i++) {
    const s = stats[`acc_p${i}`];
    rejected += s.rejected_429 - (before429[`acc_p${i}`]?.rejected_429 ?? 0);
    maxIn1s = Math.max(maxIn1s, s.max_in_any_1s);
  }
  const sorted = interactive.sort((a, b) => a - b);
  const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
  const idealMs = (PER_TENANT / RPS) * 1000;
  const rewards = PACING_TENANTS * PER_TENANT;
  return {
    tenants: PACING_TENANTS,
    rewards,
    rate_limit_rps_per_account: RPS,
    submit_ms: Math.round(submitMs),
    total_s: +(totalMs / 1000).toFixed(1),
    ideal_s: idealMs / 1000,
    time_vs_ideal: +(totalMs / idealMs).toFixed(3),
    slowest_fastest_tenant_s: [
      +(Math.max(...finished.values()) / 1000).toFixed(1),
      +(Math.min(...finished.values()) / 1000).toFixed(1),
    ],
    rejected_429: rejected,
    max_requests_in_any_1s: maxIn1s,
    interactive_sends: sorted.length,
    interactive_not_sent_at_once: notSent,
    interactive_p50_ms: +q(0.5).toFixed(1),
    interactive_p99_ms: +q(0.99).toFixed(1),
    rss_mb: {
      before: Math.round(rssBefore),
      during_max: Math.round(Math.max(...rss)),
      after: Math.round(rssAfter),
    },
    heap_used_mb: {
      before: Math.round(heapBefore),
      during_max: Math.round(Math.max(...heap)),
      after: Math.round(heapAfter),
    },
    // The same batches against the account's every request, the interactive sends included (they take slots too).
    time_vs_ideal_all_requests: +(
      totalMs /
      (((PER_TENANT + sorted.length / PACING_TENANTS) / RPS) * 1000)
    ).toFixed(3),
    // Every statement of the run (batches, interactive sends, workers, pacing) per batch reward.
    db_round_trips_per_reward: deps.statStatements ? +(callsDuring / rewards).toFixed(2) : null,
  };
}
