import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

/** One store per table (docs/architecture.md): scripts/table-owners.mjs finds no table written from two files. */
describe('one store per table', () => {
  it('every table the migrations create is written from at most one source file', () => {
    const run = spawnSync(process.execPath, ['scripts/table-owners.mjs'], {
      cwd: path.join(__dirname, '..'),
      encoding: 'utf8',
    });
    expect(run.stdout.split('\n').filter((line) => line.startsWith('SHARED'))).toEqual([]);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('ok     dispatch_rewards: src/reward-dispatch/dispatch.store.ts\n');
  });
});
