import request from 'supertest';
import type { TestApp } from './app';
import { OPERATOR_KEY } from './app';

export const RETURN_URL = 'https://platform.example.com/settings/rewards';
export const op = { Authorization: `Bearer ${OPERATOR_KEY}` };

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function control(t: TestApp, path: string, body: unknown = {}): Promise<Record<string, any>> {
  const res = await request(t.baseUrl)
    .post(`/sandbox/__control${path}`)
    .send(body as object);
  return res.body;
}

export async function createTenant(t: TestApp, id: string): Promise<void> {
  await request(t.baseUrl)
    .post('/v1/tenants')
    .set(op)
    .send({ id, name: `Tenant ${id}`, return_urls: [RETURN_URL] })
    .expect(201);
}

/** Follows the browser's path up to the rewards service's consent page; returns what the browser holds. */
export async function startConnect(
  t: TestApp,
  tenant: string,
  body: Record<string, unknown> = { return_url: RETURN_URL },
) {
  const session = await request(t.baseUrl)
    .post(`/v1/tenants/${tenant}/connect-sessions`)
    .set(op)
    .send(body)
    .expect(201);
  const connectPath = new URL(session.body.connect_url as string).pathname;
  const authorize = await request(t.baseUrl).get(`${connectPath}/authorize`).expect(302);
  const cookie = (authorize.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
  const upstream = new URL(authorize.headers.location);
  return { session: session.body, connectPath, cookie, upstream };
}

/**
 * Approves at the sandbox consent page — as `accountId` (one of the page's accounts) when given, else the page's
 * default (Demo Rewards Co) — and returns the callback URL (path and query) it redirects to.
 */
export async function approve(
  t: TestApp,
  upstream: URL,
  decision: 'approve' | 'deny' = 'approve',
  accountId?: string,
): Promise<string> {
  const consent = await request(t.baseUrl).get(`${upstream.pathname}${upstream.search}`).expect(200);
  const requestId = /name="request_id" value="([^"]+)"/.exec(consent.text)?.[1] as string;
  const decided = await request(t.baseUrl)
    .post('/sandbox/oauth/authorize/decision')
    .type('form')
    .send({ request_id: requestId, decision, ...(accountId ? { account_id: accountId } : {}) })
    .expect(302);
  const callback = new URL(decided.headers.location);
  return `${callback.pathname}${callback.search}`;
}

/** The whole flow; returns the connection id. */
export async function connectTenant(t: TestApp, tenant: string): Promise<string> {
  const { cookie, upstream } = await startConnect(t, tenant);
  const callback = await approve(t, upstream);
  const done = await request(t.baseUrl).get(callback).set('Cookie', cookie).expect(302);
  if (!done.headers.location.includes('status=connected'))
    throw new Error(`connect failed: ${done.headers.location}`);
  const connection = await request(t.baseUrl).get(`/v1/tenants/${tenant}/connection`).set(op).expect(200);
  return connection.body.id as string;
}

/**
 * A browser's connect walk against a sandbox that approves by itself (`autoApprove`), with plain fetch — for gateways
 * running as their own processes: authorize (keeps the state cookie), the service's redirect, the gateway's callback.
 * Returns the callback's answer (the connected page, or the redirect to the tenant's return URL).
 */
export async function connectAutoApproved(authorizeUrl: string): Promise<Response> {
  const authorize = await fetch(authorizeUrl, { redirect: 'manual' });
  const cookie = (authorize.headers.getSetCookie()[0] ?? '').split(';')[0];
  const consent = await fetch(authorize.headers.get('location') as string, { redirect: 'manual' });
  return fetch(consent.headers.get('location') as string, {
    redirect: 'manual',
    headers: { Cookie: cookie },
  });
}

/**
 * For a gateway running as its own process, with a sandbox that approves by itself: creates `tenant` (funded from the
 * sandbox's demo source) and connects it, through `api` (operator-authenticated requests to that gateway).
 */
export async function createConnectedTenant(
  api: (path: string, init?: RequestInit) => Promise<Response>,
  tenant: string,
): Promise<void> {
  await api('/v1/tenants', {
    method: 'POST',
    body: JSON.stringify({ id: tenant, name: tenant, default_funding_source_id: 'FSDEMOMAIN' }),
  });
  const session = (await (
    await api(`/v1/tenants/${tenant}/connect-sessions`, { method: 'POST', body: '{}' })
  ).json()) as { connect_url: string };
  const done = await connectAutoApproved(`${session.connect_url}/authorize`);
  if (done.status !== 200) throw new Error(`connecting ${tenant} ended with ${done.status}`);
}

/**
 * The same walk through the sandbox's consent page, clicking Approve, with plain fetch (a gateway with its built-in
 * sandbox at `base`, as `npm start` runs it). Returns the gateway callback's answer.
 */
export async function connectByApproving(base: string, authorizeUrl: string): Promise<Response> {
  const authorize = await fetch(authorizeUrl, { redirect: 'manual' });
  const cookie = (authorize.headers.getSetCookie()[0] ?? '').split(';')[0];
  const consent = await (await fetch(authorize.headers.get('location') as string)).text();
  const requestId = /name="request_id" value="([^"]+)"/.exec(consent)?.[1] as string;
  const decided = await fetch(`${base}/sandbox/oauth/authorize/decision`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ request_id: requestId, decision: 'approve' }).toString(),
  });
  return fetch(decided.headers.get('location') as string, {
    redirect: 'manual',
    headers: { Cookie: cookie },
  });
}
