import { type ChildProcess, spawn } from 'node:child_process';
import * as path from 'node:path';
import { scriptArgs } from './script';

export interface MainProcess {
  child: ChildProcess;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  /** Resolves with the exit code (or signal) once the process is gone. */
  exited: Promise<number | string>;
}

/**
 * Runs a script of src/ (main.ts, cli.ts) as its own OS process with exactly `env` (plus PATH and HOME): nothing of
 * the test runner's environment leaks in, so defaults are the ones a fresh install sees.
 */
export function runSrc(
  script: 'main.ts' | 'cli.ts',
  env: Record<string, string>,
  args: string[] = [],
): MainProcess {
  const child = spawn(process.execPath, [...scriptArgs(`src/${script}`), ...args], {
    cwd: path.join(__dirname, '../..'),
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      TS_NODE_TRANSPILE_ONLY: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  return { child, output: () => output, exited };
}

/** Waits until the output matches, the process exits, or the timeout passes (then throws with the output). */
export async function waitForOutput(p: MainProcess, pattern: RegExp, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pattern.test(p.output())) {
    if (p.child.exitCode !== null)
      throw new Error(`process exited (${p.child.exitCode}) before ${pattern}: ${p.output().slice(-3000)}`);
    if (Date.now() > deadline)
      throw new Error(`no ${pattern} within ${timeoutMs} ms: ${p.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
