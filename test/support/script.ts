import * as path from 'node:path';

const ROOT = path.join(__dirname, '../..');

/**
 * The node arguments that run a script of the project (`src/main.ts`, `test/support/token-worker.ts`, …) as its own
 * process: its JavaScript in the copy that global setup transpiled once for the run (test/support/transpile.mjs), or,
 * outside such a run, the TypeScript source through ts-node.
 */
export function scriptArgs(file: string): string[] {
  const build = process.env.RG_TEST_BUILD;
  if (build) return [path.join(build, file.replace(/\.ts$/, '.js'))];
  return ['-r', 'ts-node/register/transpile-only', path.join(ROOT, file)];
}
