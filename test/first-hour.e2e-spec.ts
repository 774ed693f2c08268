import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { PAGE_CSP } from '../src/common/security-headers';
import { firstUnreachable } from '../src/database/embedded-postgres';
import type { TestApp } from './support/app';
import { freePort, startTestApp } from './support/app';
import { connectByApproving } from './support/connect';
import { createTestDatabase } from './support/database';
import { scriptArgs } from './support/script';
import { shellPath } from './support/shell';

const ROOT = path.join(__dirname, '..');
const RETURN_URL = 'https://platform.example.com/settings/rewards';

/**
 * The first hour of a newcomer: `npm start` on a fresh DATA_DIR, the commands its banner prints, the README's next
 * step, the start page at `/`, and Ctrl-C.
 */
describe('the first hour', () => {
  describe('GET /', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({ LOG_LEVEL: 'silent' });
    });
    afterAll(async () => {
      await t.close();
    });

    it('answers a browser with a small page: docs, ops, readiness and the quick start, loading nothing', async () => {
      const res = await request(t.baseUrl)
        .get('/')
        .set('Accept', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8')
        .expect(200)
        .expect('Content-Type', /text\/html/);
      // The pages' policy (no script, no image, no external style), which its one inline <style> block fits.
      const csp = Object.entries(PAGE_CSP)
        .map(([k, v]) => `${k} ${v.join(' ')}`)
        .join(';');
      expect(res.headers['content-security-policy']).toBe(csp);
      expect(res.headers.vary).toMatch(/Accept/);
      for (const href of ['/docs', '/ops', '/health/ready']) expect(res.text).toContain(`<a href="${href}"`);
      expect(res.text).not.toMatch(/<script|<img|<link|<iframe|\ssrc=|\sstyle=|url\(/i);
      expect(res.text).not.toMatch(/href="https?:/); // every link stays on the gateway
      // The quick start's three steps, with this gateway's address and the tenant's return_urls.
      expect(res.text).toContain(`export GW=${t.baseUrl}`);
      expect(res.text).toContain(
        '-d &#39;{&quot;id&quot;:&quot;acme&quot;,&quot;name&quot;:&quot;Acme Corp&quot;}&#39;',
      );
      expect(res.text).toContain('export API_KEY=$(curl');
      expect(res.text).toContain('$GW/v1/tenants/acme/dispatches?limit=1');
      expect(res.text).toContain('$GW/v1/tenants/acme/connect-sessions');
      expect(res.text).toContain('$GW/v1/tenants/acme/rewards');
      expect(res.text).not.toContain(t.config.operatorApiKey);
      // What curl sends (*/*) gets the page too; HEAD answers without a body.
      await request(t.baseUrl)
        .get('/')
        .set('Accept', '*/*')
        .expect('Content-Type', /text\/html/);
      await request(t.baseUrl).head('/').expect(200);
    });

    it('answers {name, docs, ops, health} when the client asks for JSON', async () => {
      const res = await request(t.baseUrl)
        .get('/')
        .set('Accept', 'application/json')
        .expect(200)
        .expect('Content-Type', /application\/json/);
      expect(res.body).toEqual({
        name: 'Rewards Gateway',
        docs: `${t.baseUrl}/docs`,
        ops: `${t.baseUrl}/ops`,
        health: `${t.baseUrl}/health/ready`,
      });
      for (const url of Object.values(res.body as Record<string, string>).slice(1)) {
        const status = (await fetch(url)).status;
        expect([200, 401]).toContain(status); // /ops asks for credentials
      }
    });
  });

  it('npm start on a fresh DATA_DIR: quiet up to the banner, whose commands work as printed; a restart shows the next step', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-first-hour-'));
    const port = await freePort();
    const base = `http://localhost:${port}`;
    // The default LOG_LEVEL (info), as `npm start` runs it.
    const main = startMain({ DATA_DIR: dataDir, PORT: String(port) });
    try {
      await main.waitFor(/^Stop with Ctrl-C\.$/m);
      const out = main.output();
      // Quiet: none of Nest's start-up lines (route mapping, modules initialised) before the banner.
      expect(out).not.toMatch(/RoutesResolver|RouterExplorer|InstanceLoader|NestFactory|Mapped \{/);
      expect(out.slice(0, out.indexOf('Rewards Gateway is running')).split('\n').length).toBeLessThan(6);
      expect(out).toMatch(/^Applied \d+ migrations \(the last: \w+\)$/m);
      expect(out).toContain(`Rewards Gateway is running at ${base}\n`);
      expect(out).not.toContain('Listening on:'); // PUBLIC_BASE_URL is this machine's address of the bound port
      // Every label in one column.
      const labels = bannerRows(out);
      expect(Object.keys(labels)).toEqual([
        'Database',
        'Rewards',
        'API docs',
        'Readiness',
        'Ops dashboard',
        'Operator key',
      ]);
      expect(new Set(Object.values(labels).map((row) => row.indexOf(row.trim().split(/: +/)[1]))).size).toBe(
        1,
      );
      expect(labels.Rewards).toBe(`  Rewards:       ${base}/sandbox (sandbox: the built-in emulator)`);
      expect(out).toContain(`  Ops dashboard: ${base}/ops`);
      expect(out).toContain(`  Operator key:  in ${path.join(dataDir, 'operator-api-key')}`);
      const key = readFileSync(path.join(dataDir, 'operator-api-key'), 'utf8').trim();
      expect(out).not.toContain(key);

      // The banner's first steps as printed, in one shell: a tenant, its own API key, a connect link.
      const first = bannerCommands(out, 'First steps:');
      expect(first.slice(0, 2)).toEqual([
        `export GW=${base}`,
        `export OPERATOR_KEY=$(cat ${path.join(dataDir, 'operator-api-key')})`,
      ]);
      expect(first).toHaveLength(5); // GW, OPERATOR_KEY, tenant, API key, connect session
      const [tenant, session, apiKey] = runCommands([...first, 'echo "$API_KEY"']);
      expect(JSON.parse(tenant)).toMatchObject({ id: 'acme', name: 'Acme Corp' });
      expect(apiKey).toMatch(/^rgk_\S+$/);
      expect(JSON.parse(session)).toMatchObject({ environment: 'sandbox' });
      // The same commands as the README's (checked against the README's own blocks).
      for (const command of first.slice(2)) expect(readmeBash()).toContain(command);

      // SIGTERM (a process manager, `docker stop`), to the process only: one line, exit code 0, Postgres stopped.
      const before = main.output().length;
      main.child.kill('SIGTERM');
      expect(await main.exited).toBe(0);
      // One line (beside the JSON request log lines of LOG_LEVEL=info, which may still be on their way).
      const said = main
        .output()
        .slice(before)
        .split('\n')
        .filter((line) => !line.startsWith('{"level":'));
      expect(said.join('\n')).toBe('SIGTERM received: stopping\n');
      expect(postgresProcessesOf(dataDir)).toEqual([]);
      expect(existsSync(path.join(dataDir, 'gateway.pid'))).toBe(false);
    } finally {
      await main.stop();
    }

    // Started again with tenant acme there but not connected: the banner offers the connect link, not the tenant.
    const again = startMain({ DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' });
    try {
      await again.waitFor(/^Stop with Ctrl-C\.$/m);
      const out = again.output();
      expect(out).not.toContain('"name":"Acme Corp"');
      const next = bannerCommands(out, 'Tenant acme has no rewards connection');
      expect(next).toHaveLength(3);
      const [session] = runCommands(next);
      const { connect_url } = JSON.parse(session) as { connect_url: string };
      expect(connect_url.startsWith(`${base}/connect/`)).toBe(true);
      // No return_url: the browser ends on the gateway's own page.
      expect(await connectInBrowser(base, connect_url)).toBe('Rewards account connected');
    } finally {
      await again.stop();
    }
  }, 180_000);

  it('Ctrl-C in a terminal right after connecting: one line, exit code 0, and the next start sends', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-first-hour-'));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = { DATA_DIR: dataDir, PORT: String(port), PUBLIC_BASE_URL: base, LOG_LEVEL: 'warn' };
    const api = (key: string, p: string, init: RequestInit = {}) =>
      fetch(`${base}${p}`, {
        ...init,
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...init.headers },
      });
    const first = startMain(env);
    try {
      await first.waitFor(/^Stop with Ctrl-C\.$/m);
      const key = readFileSync(path.join(dataDir, 'operator-api-key'), 'utf8').trim();
      const tenant = { id: 'acme', name: 'Acme Corp', return_urls: [RETURN_URL] };
      expect((await api(key, '/v1/tenants', { method: 'POST', body: JSON.stringify(tenant) })).status).toBe(
        201,
      );
      const session = (await (
        await api(key, '/v1/tenants/acme/connect-sessions', {
          method: 'POST',
          body: JSON.stringify({ return_url: RETURN_URL }),
        })
      ).json()) as { connect_url: string };
      expect(await connectInBrowser(base, session.connect_url)).toBe(`${RETURN_URL}?status=connected`);

      // Ctrl-C signals the terminal's whole foreground process group: the gateway and whatever it started. At once,
      // before the sandbox's periodic write: the stop itself must write it, with Postgres still up.
      const postmaster = Number(
        readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0],
      );
      const before = first.output().length;
      process.kill(-(first.child.pid as number), 'SIGINT');
      expect(await first.exited).toBe(0);
      expect(first.output().slice(before)).toBe('SIGINT received: stopping\n');
      expect(isAlive(postmaster)).toBe(false);
      expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
      expect(existsSync(path.join(dataDir, 'gateway.pid'))).toBe(false);
    } finally {
      await first.stop();
    }

    // Started again: the sandbox kept the grant, so the tenant sends (no needs_reauth); the banner's next step is
    // the send, with a key of the tenant's own.
    const second = startMain(env);
    try {
      await second.waitFor(/^Stop with Ctrl-C\.$/m);
      const banner = bannerCommands(second.output(), 'Tenant acme is connected');
      expect(banner).toHaveLength(4); // GW, OPERATOR_KEY, a new API key, the send with it
      expect(banner[2]).toMatch(/^export API_KEY=\$\(curl -s -X POST \$GW\/v1\/tenants\/acme\/api-keys /);
      expect(banner[3]).toMatch(
        /^curl -s -X POST \$GW\/v1\/tenants\/acme\/rewards -H "Authorization: Bearer \$API_KEY"/,
      );
      // As printed: the tenant's new key sends.
      const [sent] = runCommands(banner);
      expect(JSON.parse(sent)).toMatchObject({ status: 'sent', counts: { sent: 1 } });
    } finally {
      await second.stop();
    }
  }, 180_000);

  it('shows the address it listens on beside PUBLIC_BASE_URL when they differ', async () => {
    const db = await createTestDatabase();
    const port = await freePort();
    const main = startMain({
      DATABASE_URL: db.url,
      VAULT_KEYS: `k1:${randomBytes(32).toString('base64')}`,
      OPERATOR_API_KEY: `rgo_${randomBytes(24).toString('hex')}`,
      PORT: String(port),
      PUBLIC_BASE_URL: 'https://rewards.example.test',
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-first-hour-')),
      LOG_LEVEL: 'warn',
    });
    try {
      await main.waitFor(/^Stop with Ctrl-C\.$/m);
      const out = main.output();
      expect(out).toContain('Rewards Gateway is running at https://rewards.example.test (PUBLIC_BASE_URL)\n');
      expect(out).toContain(
        `  Listening on:  0.0.0.0:${port} (http://localhost:${port} from this machine)\n`,
      );
      expect(out).toContain('  Database:      DATABASE_URL\n');
      expect(out).toContain('  Operator key:  the value of OPERATOR_API_KEY\n');
      expect(out).toContain('  export GW=https://rewards.example.test\n');
      expect(out).toContain('  export OPERATOR_KEY=...   # the value of OPERATOR_API_KEY\n');
      const home = await fetch(`http://127.0.0.1:${port}/`, { headers: { Accept: 'application/json' } });
      expect(((await home.json()) as { docs: string }).docs).toBe('https://rewards.example.test/docs');
      const before = main.output().length;
      main.child.kill('SIGINT');
      expect(await main.exited).toBe(0);
      expect(main.output().slice(before)).toBe('SIGINT received: stopping\n');
    } finally {
      await main.stop();
      await db.drop();
    }
  }, 120_000);

  it('a port already in use: one message, exit code 1, and the embedded Postgres stopped again', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '0.0.0.0', () => r()));
    const port = (blocker.address() as { port: number }).port;
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-first-hour-'));
    const main = startMain({ DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' });
    try {
      expect(await main.exited).toBe(1);
      expect(main.output()).toContain(
        `Rewards Gateway failed to start: port ${port} is already in use (another gateway?): stop that process or set PORT\n`,
      );
      expect(main.output()).not.toContain('is running at');
      expect(postgresProcessesOf(dataDir)).toEqual([]);
      expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
      expect(existsSync(path.join(dataDir, 'gateway.pid'))).toBe(false);
    } finally {
      await main.stop();
      await new Promise((r) => blocker.close(r));
    }
  }, 120_000);

  // As root, the embedded Postgres runs as the `postgres` user: a DATA_DIR in a `mktemp -d` folder (mode 0700) or a
  // clone under /root is out of its reach. That is said in one line, with what to do, and the process ends with 1.
  const asRoot = process.getuid?.() === 0;
  it(`${asRoot ? 'as root' : 'as a user'}, a DATA_DIR inside a mode-0700 folder: ${asRoot ? 'one line saying what to do, exit code 1' : 'starts (Postgres runs as this user)'}`, async () => {
    const folder = mkdtempSync(path.join(tmpdir(), 'rg-private-'));
    chmodSync(folder, 0o700);
    const dataDir = path.join(folder, 'data');
    const main = startMain({ DATA_DIR: dataDir, PORT: String(await freePort()), LOG_LEVEL: 'warn' });
    try {
      if (!asRoot) {
        await main.waitFor(/^Stop with Ctrl-C\.$/m);
        return;
      }
      expect(await main.exited).toBe(1);
      expect(main.output()).toBe(
        'Rewards Gateway failed to start: the embedded Postgres runs as the "postgres" user (the gateway runs as ' +
          `root), which cannot enter ${folder} (mode 0700) on the way to DATA_DIR ${dataDir}: set DATA_DIR to a ` +
          'directory it can reach (e.g. DATA_DIR=/var/lib/rewards-gateway), or set DATABASE_URL to use a Postgres ' +
          'of your own\n',
      );
      expect(existsSync(path.join(dataDir, 'gateway.pid'))).toBe(false);
      // The same check finds the first closed directory on the way to the Postgres programs (a clone under /root).
      const postgres = {
        uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
        gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
      };
      mkdirSync(path.join(folder, 'clone', 'node_modules'), { recursive: true });
      expect(firstUnreachable(path.join(folder, 'clone', 'node_modules'), postgres)).toBe(folder);
      chmodSync(folder, 0o755);
      expect(firstUnreachable(path.join(folder, 'clone', 'node_modules'), postgres)).toBeNull();
    } finally {
      await main.stop();
    }
  }, 120_000);
});

interface Main {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | string>;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Cleanup: SIGTERM if still running, then waits. */
  stop(): Promise<void>;
}

/**
 * src/main.ts as its own process, as `npm start` runs it (with exactly `env`, plus PATH and HOME), in a process group
 * of its own: `process.kill(-pid, 'SIGINT')` is then what a terminal's Ctrl-C does. Plain JavaScript, as `npm start`
 * runs the build: the copy global setup transpiled once for the run (test/support/script.ts), not ts-node compiling
 * the sources again at each start.
 */
function startMain(env: Record<string, string>): Main {
  const child = spawn(process.execPath, scriptArgs('src/main.ts'), {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      TS_NODE_TRANSPILE_ONLY: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  return {
    child,
    output: () => output,
    exited,
    async waitFor(pattern, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      while (!pattern.test(output)) {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`main exited before ${pattern}: ${output.slice(-3000)}`);
        if (Date.now() > deadline)
          throw new Error(`no ${pattern} within ${timeoutMs} ms: ${output.slice(-3000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Runs a bash script (the banner's commands) as a terminal would, with curl (a stand-in when none is installed). */
function runShell(script: string): string {
  return execFileSync('bash', ['-c', `set -euo pipefail\n${script}`], {
    cwd: ROOT,
    env: { PATH: shellPath(), HOME: process.env.HOME ?? '' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Every ```bash block of README.md, as written. */
function readmeBash(): string {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]).join('\n');
}

/** The banner's rows of labels (`  Database:      …`), by label. */
function bannerRows(out: string): Record<string, string> {
  const head = out.slice(
    out.indexOf('Rewards Gateway is running'),
    out.indexOf('\n\n', out.indexOf('Rewards Gateway is running')),
  );
  return Object.fromEntries(
    head
      .split('\n')
      .slice(1)
      .map((row) => [/^ {2}([^:]+):/.exec(row)?.[1] ?? row, row]),
  );
}

/** The commands the banner prints after the line starting with `intro` (indented; continuation lines joined). */
function bannerCommands(out: string, intro: string): string[] {
  const from = out.indexOf(`\n${intro}`);
  expect(from).toBeGreaterThan(0);
  const lines = out
    .slice(from + 1)
    .split('\n')
    .slice(1);
  const commands: string[] = [];
  for (const line of lines) {
    if (!line.startsWith('  ')) break;
    const previous = commands.at(-1);
    // Continued: after a backslash, or inside a quoted string (an odd number of single quotes so far).
    const open = previous !== undefined && (previous.split("'").length - 1) % 2 === 1;
    if (previous?.endsWith('\\') || open) commands[commands.length - 1] = `${previous}\n${line.slice(2)}`;
    else commands.push(line.slice(2));
  }
  return commands;
}

/** Runs the commands in one bash, as typed in a terminal; returns each one's output that printed any, in order. */
function runCommands(commands: string[]): string[] {
  return runShell(commands.map((c) => `${c}\necho; echo ---`).join('\n'))
    .split('\n---\n')
    .map((piece) => piece.trim())
    .filter((piece) => piece !== '');
}

/**
 * What the browser does after opening connect_url: Connect, Approve. Returns where it is sent back to (a return_url),
 * or the title of the page the gateway shows (no return_url).
 */
async function connectInBrowser(base: string, connectUrl: string): Promise<string | null> {
  expect((await fetch(connectUrl)).status).toBe(200);
  const back = await connectByApproving(base, `${connectUrl}/authorize`);
  return back.headers.get('location') ?? /<h1>([^<]*)<\/h1>/.exec(await back.text())?.[1] ?? null;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Live processes whose command line names `dataDir` (the embedded Postgres: `postgres -D <dataDir>/postgres`). */
function postgresProcessesOf(dataDir: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(path.join(dataDir, 'postgres'));
      } catch {
        return false;
      }
    })
    .map(Number);
}
