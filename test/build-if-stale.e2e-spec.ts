import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const ROOT = path.join(__dirname, '..');
const SCRIPT = path.join(ROOT, 'scripts', 'build-if-stale.mjs');

/**
 * `npm start` (and cli, sandbox, bench) builds only when dist/ is missing or older than its sources: the script run
 * on a small project of its own, with a stand-in build that records each run and, like `nest build`, empties dist/.
 */
describe('build-if-stale: npm start builds only when the sources are newer than dist/', () => {
  let project: string;
  const builds = () =>
    existsSync(path.join(project, 'builds.log'))
      ? readFileSync(path.join(project, 'builds.log'), 'utf8').length
      : 0;
  const run = (...extra: string[]) =>
    spawnSync(process.execPath, [SCRIPT, ...extra, process.execPath, 'build.js'], {
      cwd: project,
      encoding: 'utf8',
    });
  /** An edit, or a `git pull` that changed the file: new content, so a modification time after the last build's start. */
  const edit = (file: string) =>
    writeFileSync(
      path.join(project, file),
      file.endsWith('.json') ? `{"edit": ${Math.random()}}` : `// ${Math.random()}`,
    );

  beforeEach(() => {
    project = mkdtempSync(path.join(tmpdir(), 'rg-build-'));
    mkdirSync(path.join(project, 'src', 'ops'), { recursive: true });
    mkdirSync(path.join(project, 'migrations'));
    writeFileSync(path.join(project, 'package.json'), '{}');
    writeFileSync(path.join(project, 'tsconfig.json'), '{}');
    writeFileSync(path.join(project, 'src', 'main.ts'), '');
    writeFileSync(path.join(project, 'src', 'ops', 'page.ts'), '');
    writeFileSync(
      path.join(project, 'build.js'),
      `const fs = require('fs');
       if (process.env.FAIL_BUILD) process.exit(2);
       fs.rmSync('dist', { recursive: true, force: true });
       fs.mkdirSync('dist/src', { recursive: true });
       fs.writeFileSync('dist/src/main.js', '');
       fs.appendFileSync('builds.log', 'x');`,
    );
    // Checked out an hour ago: every source older than any build of the test.
    const before = new Date(Date.now() - 3_600_000);
    for (const file of [
      'package.json',
      'tsconfig.json',
      'src/main.ts',
      'src/ops/page.ts',
      'src/ops',
      'src',
      'migrations',
    ])
      utimesSync(path.join(project, file), before, before);
  });
  afterEach(() => rmSync(project, { recursive: true, force: true }));

  it('builds a fresh clone once, then not again until a source changes', () => {
    const first = run();
    expect(first.status).toBe(0);
    expect(first.stderr).toBe('Building dist/ (no build yet)…\n');
    expect(builds()).toBe(1);
    const second = run();
    expect(second.status).toBe(0);
    expect(second.stderr).toBe('');
    expect(builds()).toBe(1);

    // An edit (or a `git pull` that changed the file): built again, and saying why.
    edit('src/ops/page.ts');
    expect(run().stderr).toBe(
      `Building dist/ (${path.join('src', 'ops', 'page.ts')} changed since the last build)…\n`,
    );
    expect(builds()).toBe(2);
    expect(run().stderr).toBe('');
    expect(builds()).toBe(2);

    // The configuration counts too: tsconfig*.json, package.json.
    for (const file of ['tsconfig.json', 'package.json']) {
      edit(file);
      expect(run().stderr).toContain(`(${file} changed since the last build)`);
    }
    expect(builds()).toBe(4);
  });

  it('a deleted source, a new migration, or a dist/ removed by hand: built again', () => {
    run();
    rmSync(path.join(project, 'src', 'ops', 'page.ts')); // no file is newer, but its directory is
    expect(run().stderr).toContain('(src/ops changed since the last build)');
    writeFileSync(path.join(project, 'migrations', '1800000000000-new.ts'), '');
    utimesSync(path.join(project, 'migrations'), new Date(0), new Date(0)); // only the file itself is new
    expect(run().stderr).toContain('(migrations/1800000000000-new.ts changed since the last build)');
    rmSync(path.join(project, 'dist'), { recursive: true });
    expect(run().stderr).toBe('Building dist/ (no build yet)…\n');
    expect(builds()).toBe(4);
  });

  it('a failed build: its exit code, no stamp, and the next start tries again; --always builds anyway', () => {
    const failed = spawnSync(process.execPath, [SCRIPT, process.execPath, 'build.js'], {
      cwd: project,
      encoding: 'utf8',
      env: { ...process.env, FAIL_BUILD: '1' },
    });
    expect(failed.status).toBe(2);
    expect(failed.stderr).toContain('The build failed (exit code 2).');
    expect(existsSync(path.join(project, 'dist', '.build-stamp'))).toBe(false);
    expect(run().stderr).toBe('Building dist/ (no build yet)…\n');
    expect(run('--always').stderr).toBe('Building dist/ (asked for)…\n');
    expect(builds()).toBe(2);
  });

  it('is what npm start, cli, sandbox and bench run before the compiled code', () => {
    const { scripts } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(scripts.start).toBe('node scripts/build-if-stale.mjs && node dist/src/main.js');
    expect(scripts.cli).toBe('node scripts/build-if-stale.mjs && node dist/src/cli.js');
    expect(scripts.sandbox).toBe('node scripts/build-if-stale.mjs && node dist/src/sandbox/main.js');
    expect(scripts.bench).toBe('node scripts/build-if-stale.mjs && node dist/bench/bench.js');
    expect(scripts.build).toBe('node scripts/build-if-stale.mjs --always');
  });
});
