#!/usr/bin/env node
// `npm test`'s static checks — `npm run lint`, `format:check` and `typecheck` — run side by side (each is one
// single-threaded process, and CI has more than one core). Each one's output is printed whole when it ends, in that
// order; the exit code is non-zero when any of them failed.
import { spawn } from 'node:child_process';

const CHECKS = ['lint', 'format:check', 'typecheck'];

function run(script) {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (error) => resolve({ script, code: 1, output: `${output}${error.message}\n` }));
    child.on('close', (code, signal) => resolve({ script, code: code ?? (signal ? 1 : 0), output }));
  });
}

const results = await Promise.all(CHECKS.map(run));
for (const { script, code, output } of results) {
  process.stdout.write(`> npm run ${script}: ${code === 0 ? 'passed' : `FAILED (exit code ${code})`}\n${output}`);
}
process.exit(results.some((r) => r.code !== 0) ? 1 : 0);
