import { type ChildProcess, spawn } from 'node:child_process';
import { waitUntilGone } from './gateway-process';
import { CLIENT } from './sandbox';
import { scriptArgs } from './script';

export interface SandboxProcess {
  child: ChildProcess;
  baseUrl: string;
  /** `/__control` call; throws on a non-2xx answer. */
  control(pathname: string, body?: unknown): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  close(): Promise<void>;
}

/**
 * The emulator as its own OS process (src/sandbox/main.ts), as the real service is another system: a test's own
 * event loop (GC, polling) cannot bunch up the requests it counts. Control API on, the test client registered.
 */
export async function startSandboxProcess(
  port: number,
  redirectUris: string[],
  env: Record<string, string> = {},
): Promise<SandboxProcess> {
  const child = spawn(process.execPath, scriptArgs('src/sandbox/main.ts'), {
    env: {
      ...process.env,
      TS_NODE_TRANSPILE_ONLY: 'true',
      SANDBOX_PORT: String(port),
      SANDBOX_CLIENT_ID: CLIENT.clientId,
      SANDBOX_CLIENT_SECRET: CLIENT.clientSecret,
      SANDBOX_REDIRECT_URIS: redirectUris.join(','),
      SANDBOX_CONTROL_ENABLED: 'true',
      SANDBOX_RATE_LIMIT_RPS: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`sandbox exited (${child.exitCode}): ${output.slice(-2000)}`);
    try {
      if ((await fetch(`${baseUrl}/__control/stats`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sandbox did not start: ${output.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    child,
    baseUrl,
    async control(pathname, body) {
      const res = await fetch(`${baseUrl}/__control${pathname}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json = await res.json();
      if (!res.ok) throw new Error(`sandbox control ${pathname}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    async close() {
      child.kill('SIGTERM');
      await waitUntilGone(child);
    },
  };
}
