import { createHash, randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSandbox } from '../../src/sandbox/sandbox.app';
import type { Sandbox } from '../../src/sandbox/sandbox.app';

export const CLIENT = {
  clientId: 'test-client',
  clientSecret: 'test-secret-value',
  redirectUri: 'http://127.0.0.1:9/oauth/callback',
};

export interface RunningSandbox extends Sandbox {
  baseUrl: string;
  close(): Promise<void>;
}

/** The emulator alone on a free port, over real HTTP, with the control API on. */
export async function startSandbox(extraRedirectUris: string[] = []): Promise<RunningSandbox> {
  const sandbox = createSandbox({
    clients: [
      {
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.clientSecret,
        redirectUris: [CLIENT.redirectUri, ...extraRedirectUris],
        name: 'Test Platform',
      },
    ],
    control: true,
  });
  const server: Server = await new Promise((resolve) => {
    const s = sandbox.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    ...sandbox,
    baseUrl: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export interface TokenResponse {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  created_at: number;
  scope: string;
  token_type: string;
}

/** Runs authorize (auto-approved) → token, returning the token response. */
export async function connect(baseUrl: string, scope = 'default'): Promise<TokenResponse> {
  await post(baseUrl, '/__control/settings', { auto_approve: true });
  const url = new URL(`${baseUrl}/oauth/authorize`);
  url.search = new URLSearchParams({
    client_id: CLIENT.clientId,
    redirect_uri: CLIENT.redirectUri,
    response_type: 'code',
    scope,
    state: 'st',
  }).toString();
  const res = await fetch(url, { redirect: 'manual' });
  const code = new URL(res.headers.get('location') as string).searchParams.get('code') as string;
  const token = await post(baseUrl, '/oauth/token', {
    grant_type: 'authorization_code',
    code,
    redirect_uri: CLIENT.redirectUri,
    client_id: CLIENT.clientId,
    client_secret: CLIENT.clientSecret,
  });
  if (token.status !== 200) throw new Error(`token exchange failed: ${JSON.stringify(token.body)}`);
  return token.body as TokenResponse;
}

export async function post(
  baseUrl: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    body: text ? (JSON.parse(text) as Record<string, any>) : {},
  };
}

export async function get(baseUrl: string, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${baseUrl}${path}`, { headers });
  const text = await res.text();
  let body: Record<string, any> = {}; // eslint-disable-line @typescript-eslint/no-explicit-any
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = { text };
  }
  return { status: res.status, headers: res.headers, body };
}
