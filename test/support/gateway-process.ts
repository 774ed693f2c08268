import { type ChildProcess, spawn } from 'node:child_process';
import { scriptArgs } from './script';

/** The real gateway (src/main.ts) as its own OS process, for crash and multi-instance tests. */
export async function startGatewayProcess(env: Record<string, string>, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, scriptArgs('src/main.ts'), {
    env: {
      ...process.env,
      TS_NODE_TRANSPILE_ONLY: 'true',
      PORT: String(port),
      // Per-account pacing off unless the test turns it on (as in testEnv).
      REWARDS_SANDBOX_RATE_LIMIT_RPS: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`gateway exited (${child.exitCode}): ${output.slice(-2000)}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/health/ready`);
      if (res.ok) return child;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not become ready: ${output.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function waitUntilGone(child: ChildProcess): Promise<void> {
  return new Promise((resolve) =>
    child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve()),
  );
}
