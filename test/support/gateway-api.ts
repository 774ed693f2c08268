import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connectAutoApproved } from './connect';
import { startGatewayProcess, waitUntilGone } from './gateway-process';
import { CLIENT } from './sandbox';
import type { SandboxProcess } from './sandbox-process';

/** A JSON answer of a gateway process. */
export interface GatewayAnswer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  headers: Headers;
}

export type GatewayApi = (
  base: string,
  path: string,
  init?: { method?: string; body?: unknown; key?: string },
) => Promise<GatewayAnswer>;

/** Calls gateway processes over real HTTP with `key` (an Idempotency-Key with `init.key`); JSON both ways. */
export function gatewayApi(key: string): GatewayApi {
  return async (base, path, init = {}) => {
    const res = await fetch(`${base}${path}`, {
      method: init.method ?? 'GET',
      headers: {
        Authorization: `Bearer ${key}`,
        'Content-Type': 'application/json',
        ...(init.key ? { 'Idempotency-Key': init.key } : {}),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
  };
}

/**
 * Creates `tenant` on the gateway at `base` (with the operator's `api`) and connects it to the sandbox process's
 * account `account` (auto-approved); resolves to the connection's id, once it is active.
 */
export async function connectToAccount(
  api: GatewayApi,
  sandbox: SandboxProcess,
  base: string,
  tenant: string,
  account: string,
): Promise<string> {
  await sandbox.control('/settings', { auto_approve_account_id: account });
  const created = await api(base, '/v1/tenants', {
    method: 'POST',
    body: { id: tenant, name: tenant, return_urls: ['https://platform.example.com/done'] },
  });
  expect(created.status).toBe(201);
  const session = await api(base, `/v1/tenants/${tenant}/connect-sessions`, { method: 'POST', body: {} });
  expect(session.status).toBe(201);
  const callback = await connectAutoApproved(
    `${base}${new URL(session.body.connect_url as string).pathname}/authorize`,
  );
  expect(callback.status).toBeLessThan(400);
  const connection = await api(base, `/v1/tenants/${tenant}/connection`);
  expect(connection.body.status).toBe('active');
  return connection.body.id as string;
}

/**
 * Gateway processes on one database and one sandbox process, pacing the sandbox environment at `rps` per account
 * (probes off, warnings only), one per port — one after another: several starting at once on a busy machine can
 * outlast a start's deadline.
 */
export async function startPacedGateways(opts: {
  databaseUrl: string;
  ports: number[];
  operatorKey: string;
  sandbox: SandboxProcess;
  rps: number;
}): Promise<{ child: ChildProcess; base: string }[]> {
  const vaultKeys = `paced:${randomBytes(32).toString('base64')}`;
  const gateways: { child: ChildProcess; base: string }[] = [];
  for (const port of opts.ports) {
    const child = await startGatewayProcess(
      {
        DATABASE_URL: opts.databaseUrl,
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
        OPERATOR_API_KEY: opts.operatorKey,
        VAULT_KEYS: vaultKeys,
        REWARDS_SANDBOX_BASE_URL: opts.sandbox.baseUrl,
        REWARDS_SANDBOX_CLIENT_ID: CLIENT.clientId,
        REWARDS_SANDBOX_CLIENT_SECRET: CLIENT.clientSecret,
        REWARDS_SANDBOX_RATE_LIMIT_RPS: String(opts.rps),
        OPS_PROBE_INTERVAL_MS: '0',
        LOG_LEVEL: 'warn',
      },
      port,
    );
    gateways.push({ child, base: `http://127.0.0.1:${port}` });
  }
  return gateways;
}

/** Stops gateway processes as an orchestrator would (SIGTERM), each gone before the next. */
export async function stopGateways(gateways: { child: ChildProcess }[]): Promise<void> {
  for (const g of gateways) {
    g.child.kill('SIGTERM');
    await waitUntilGone(g.child);
  }
}
