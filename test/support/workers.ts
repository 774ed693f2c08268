import { type ChildProcess, fork } from 'node:child_process';
import type { TestApp } from './app';
import { scriptArgs } from './script';

/** A caller's outcome; `tokens`: every token it was handed, one per attempt. */
export type CallResult = { status: number | string; tokens: string[]; ms: number };

/** The environment a token worker needs to act as another gateway instance of `t`. */
export function workerEnv(t: TestApp): Record<string, string> {
  return {
    DATABASE_URL: t.databaseUrl,
    VAULT_KEYS: t.config.vaultKeys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(','),
    REWARDS_SANDBOX_BASE_URL: `${t.baseUrl}/sandbox`,
    REWARDS_SANDBOX_CLIENT_ID: t.config.rewards.sandbox?.clientId as string,
    REWARDS_SANDBOX_CLIENT_SECRET: t.config.rewards.sandbox?.clientSecret as string,
    OPERATOR_API_KEY: 'x'.repeat(30),
  };
}

/** Forks test/support/token-worker.ts as its own OS process and waits until it is ready. */
export function startTokenWorker(env: Record<string, string>): Promise<ChildProcess> {
  const args = scriptArgs('test/support/token-worker.ts');
  const child = fork(args[args.length - 1], [], {
    execArgv: args.slice(0, -1),
    env: { ...process.env, WORKER_ENV: JSON.stringify(env), TS_NODE_TRANSPILE_ONLY: 'true' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`worker exited with ${code}`)));
  });
}

/**
 * Asks a worker to fire `calls` concurrent callers that need a token; resolves with their outcomes, and the outcome of
 * the one service call the worker makes after them (see token-worker.ts).
 */
export function workerRound(
  worker: ChildProcess,
  connectionId: string,
  calls: number,
): Promise<{ callers: CallResult[]; probe: CallResult }> {
  return new Promise((resolve) => {
    worker.once('message', (round) => resolve(round as { callers: CallResult[]; probe: CallResult }));
    worker.send({ connectionId, calls });
  });
}
