/**
 * `npm run bench`, section "hostile": what a flood of 1 MiB bodies with wrong keys costs the gateway before any
 * authentication succeeds, and what it does to a cheap endpoint meanwhile. 8 clients post 1 MiB JSON bodies with
 * wrong keys for `durationMs`; one more client samples `GET /health/live` every 20 ms.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';

const BODY = Buffer.concat([
  Buffer.from('{"rewards":['),
  Buffer.alloc(1024 * 1024 - 14, 0x20),
  Buffer.from(']}'),
]);

function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10; // utime + stime, 10 ms ticks
}

function hostilePost(base: URL, i: number): Promise<number> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: base.hostname,
        port: base.port,
        path: '/v1/tenants/bench/rewards',
        method: 'POST',
        headers: {
          Authorization: `Bearer rgk_${String(i % 10_000).padStart(4, '0')}hostilehostilehostile`,
          'Content-Type': 'application/json',
          'Content-Length': String(BODY.length),
          'Idempotency-Key': `h-${i}`,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0)); // the server closed after answering: the unread body is not its problem
    req.end(BODY);
  });
}

async function sampleLive(base: string, until: number): Promise<number[]> {
  const latencies: number[] = [];
  while (Date.now() < until) {
    const started = performance.now();
    await fetch(`${base}/health/live`).then((r) => r.arrayBuffer());
    latencies.push(performance.now() - started);
    await new Promise((r) => setTimeout(r, 20));
  }
  return latencies.sort((a, b) => a - b);
}

const pct = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] : 0;

export async function hostileFlood(gateway: string, gatewayPid: number, durationMs = 5_000) {
  const base = new URL(gateway);
  const idle = await sampleLive(gateway, Date.now() + 1_000);
  const cpuBefore = cpuMs(gatewayPid);
  const until = Date.now() + durationMs;
  let sent = 0;
  const statuses = new Map<number, number>();
  const flood = Array.from({ length: 8 }, async () => {
    while (Date.now() < until) {
      const status = await hostilePost(base, sent++);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
  });
  const during = await sampleLive(gateway, until);
  await Promise.all(flood);
  const cpu = cpuMs(gatewayPid) - cpuBefore;
  return {
    hostile_requests: sent,
    hostile_statuses: Object.fromEntries(statuses),
    gateway_cpu_ms_per_hostile_request: Math.round((cpu / Math.max(1, sent)) * 100) / 100,
    health_live_p50_ms_idle: Math.round(pct(idle, 0.5) * 10) / 10,
    health_live_p99_ms_idle: Math.round(pct(idle, 0.99) * 10) / 10,
    health_live_p50_ms_during_flood: Math.round(pct(during, 0.5) * 10) / 10,
    health_live_p99_ms_during_flood: Math.round(pct(during, 0.99) * 10) / 10,
  };
}
