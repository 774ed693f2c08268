#!/usr/bin/env node
// `npm test`: the static checks — `npm run lint`, `format:check` and `typecheck` — and Jest, side by side (each check
// is one single-threaded process and the Jest suite mostly waits, so they overlap well). Jest's output streams as it
// runs; each check's output is printed whole after Jest ends, in that order. Arguments go to Jest
// (`npm test -- test/send-route`). The exit code is non-zero when any of them failed.
import { spawn } from 'node:child_process';

const CHECKS = ['lint', 'format:check', 'typecheck'];

function run(command, args, buffered) {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      stdio: ['ignore', buffered ? 'pipe' : 'inherit', buffered ? 'pipe' : 'inherit'],
    });
    let output = '';
    child.stdout?.on('data', (d) => (output += d));
    child.stderr?.on('data', (d) => (output += d));
    child.on('error', (error) => resolve({ code: 1, output: `${output}${error.message}\n` }));
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), output }));
  });
}

const checks = CHECKS.map((script) =>
  run('npm', ['run', '--silent', script], true).then((r) => ({ script, ...r })),
);
const jest = await run('npx', ['jest', ...process.argv.slice(2)], false);
const results = await Promise.all(checks);
for (const { script, code, output } of results) {
  process.stdout.write(
    `> npm run ${script}: ${code === 0 ? 'passed' : `FAILED (exit code ${code})`}\n${output}`,
  );
}
process.stdout.write(`> jest: ${jest.code === 0 ? 'passed' : `FAILED (exit code ${jest.code})`}\n`);
process.exit(jest.code !== 0 || results.some((r) => r.code !== 0) ? 1 : 0);
