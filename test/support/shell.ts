import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

let cached: string | undefined;

/**
 * A PATH on which the README's and the banner's commands run: this one, plus a stand-in `curl` (the options those
 * commands use: -s, -X, -H, -d) when the machine has none.
 */
export function shellPath(): string {
  if (cached !== undefined) return cached;
  const PATH = process.env.PATH ?? '';
  try {
    execFileSync('bash', ['-c', 'command -v curl'], { stdio: 'ignore' });
    return (cached = PATH);
  } catch {
    const bin = mkdtempSync(path.join(tmpdir(), 'rg-curl-'));
    writeFileSync(
      path.join(bin, 'curl'),
      `#!${process.execPath}
const a = process.argv.slice(2); let method = 'GET', body, url; const headers = {};
for (let i = 0; i < a.length; i++) {
  if (a[i] === '-s') continue;
  else if (a[i] === '-X') method = a[++i];
  else if (a[i] === '-H') { const h = a[++i]; headers[h.slice(0, h.indexOf(':')).trim()] = h.slice(h.indexOf(':') + 1).trim(); }
  else if (a[i] === '-d') { body = a[++i]; if (method === 'GET') method = 'POST'; }
  else url = a[i];
}
fetch(url, { method, headers, body }).then((r) => r.text()).then((t) => process.stdout.write(t), () => process.exit(7));
`,
    );
    chmodSync(path.join(bin, 'curl'), 0o755);
    return (cached = `${bin}:${PATH}`);
  }
}
