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

/**
 * Resolves as soon as the output matches (checked on every chunk the process writes); throws with the output when
 * the process exits first or the timeout passes.
 */
export function waitForOutput(p: MainProcess, pattern: RegExp, timeoutMs = 60_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const streams = [p.child.stdout, p.child.stderr];
    const stop = () => {
      clearTimeout(timer);
      for (const s of streams) s?.off('data', check);
      p.child.off('exit', exited);
    };
    const check = () => {
      if (!pattern.test(p.output())) return;
      stop();
      resolve();
    };
    const exited = () => {
      // The last chunks may be read after the exit: give them a turn before deciding.
      setImmediate(() => {
        if (pattern.test(p.output())) return check();
        stop();
        reject(
          new Error(`process exited (${p.child.exitCode}) before ${pattern}: ${p.output().slice(-3000)}`),
        );
      });
    };
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`no ${pattern} within ${timeoutMs} ms: ${p.output().slice(-3000)}`));
    }, timeoutMs);
    for (const s of streams) s?.on('data', check);
    p.child.once('exit', exited);
    if (p.child.exitCode !== null) exited();
    else check();
  });
}
