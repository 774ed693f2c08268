#!/usr/bin/env node
// `npm start`, `npm run cli`, `npm run sandbox` and `npm run bench` run the compiled code in dist/. This builds it first
// only when it is missing or older than its sources, so a start after the first one skips the ~15 s `nest build`,
// while a fresh clone, a `git pull` or an edit still gets a build.
//
//   node scripts/build-if-stale.mjs [--always] [build command…]     (default: nest build; --always: build anyway)
//
// The build's own stamp, dist/.build-stamp, carries the time the last successful build started; the sources are
// src/, migrations/, bench/, tsconfig*.json, nest-cli.json, package.json and package-lock.json — files and the
// directories themselves (a deleted or renamed file changes its directory's time). Run from the project's root (npm
// does).
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, statSync, utimesSync } from 'node:fs';
import * as path from 'node:path';

const root = process.cwd();
const stamp = path.join(root, 'dist', '.build-stamp');
const SOURCE_DIRS = ['src', 'migrations', 'bench'];
const SOURCE_FILES = ['package.json', 'package-lock.json', 'nest-cli.json'];

/** The newest source (its path and modification time in ms), walking the source directories. */
function newestSource() {
  let newest = { file: null, mtimeMs: 0 };
  const consider = (file) => {
    const { mtimeMs } = statSync(file);
    if (mtimeMs > newest.mtimeMs) newest = { file, mtimeMs };
  };
  const walk = (dir) => {
    consider(dir);
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else consider(full);
    }
  };
  for (const dir of SOURCE_DIRS) if (existsSync(path.join(root, dir))) walk(path.join(root, dir));
  const files = [...SOURCE_FILES, ...readdirSync(root).filter((f) => /^tsconfig.*\.json$/.test(f))];
  for (const file of files) if (existsSync(path.join(root, file))) consider(path.join(root, file));
  return newest;
}

function staleBecause() {
  if (!existsSync(stamp) || !existsSync(path.join(root, 'dist', 'src', 'main.js'))) return 'no build yet';
  const built = statSync(stamp).mtimeMs;
  const newest = newestSource();
  return newest.mtimeMs > built ? `${path.relative(root, newest.file)} changed since the last build` : null;
}

const argv = process.argv.slice(2);
const always = argv[0] === '--always';
if (always) argv.shift();
const reason = always ? 'asked for' : staleBecause();
if (reason) {
  const [command, ...args] = argv.length ? argv : ['nest', 'build'];
  process.stderr.write(`Building dist/ (${reason})…\n`);
  const startedAt = new Date();
  // Local binaries (nest) first, as npm scripts have them.
  const PATH = [path.join(root, 'node_modules', '.bin'), process.env.PATH].join(path.delimiter);
  // The build's output goes to stderr: stdout stays the command's own (`npm run cli -- vault:generate-key` prints a key).
  const build = spawnSync(command, args, { stdio: ['inherit', 2, 2], env: { ...process.env, PATH } });
  if (build.status !== 0) {
    process.stderr.write(`The build failed (${build.error?.message ?? `exit code ${build.status}`}).\n`);
    process.exit(build.status || 1);
  }
  // Stamped with the build's start: a source saved during the build is newer, and rebuilds next time.
  closeSync(openSync(stamp, 'w'));
  utimesSync(stamp, startedAt, startedAt);
}
