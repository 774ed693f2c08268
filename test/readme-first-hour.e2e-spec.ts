import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser } from 'playwright-core';
import { freePort } from './support/app';
import { launchChromium } from './support/browser';
import { type MainProcess, runSrc, waitForOutput } from './support/main-process';
import { shellPath } from './support/shell';

const ROOT = path.join(__dirname, '..');

/**
 * The README's quick start and first hour, run as written: its own blocks, read from README.md.
 *
 * - The gateway is started as `npm start` starts it (src/main.ts with nothing but a fresh DATA_DIR and a free PORT);
 *   the README's "Quick start" block must be exactly `npm install && npm start`, and its banner block (marked
 *   `<!-- first-hour-test: banner -->`) must be what the gateway prints, line by line.
 * - Every ```bash block under "The first hour" runs, in order, in ONE bash session, as typed in a terminal. A block is
 *   cut into the commands before each `# → …` line, which shows what they print: the output must match it whole
 *   (`…` stands for anything). Lines a background job prints (the webhook receiver's `webhook…` lines) are set aside.
 * - `<!-- first-hour-test: browser -->`: the paragraph's **bold** phrases are clicked in Chromium, in order, from the
 *   `connect_url` printed last; the last one is the heading of the page it must land on.
 * - `<!-- first-hour-test: output -->`: each line of the ```text block must appear among the background lines.
 * - `<!-- first-hour-test: restart -->`: after the steps the gateway is stopped (SIGINT) and started again; each line
 *   of the block must be in its banner.
 *
 * Only the addresses change: this gateway's port for 3000, a free port for the receiver's 4000, and the fresh
 * DATA_DIR for `.data/`.
 */
describe("the README's first hour, as written", () => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const sectionOf = (heading: string) => {
    const start = readme.indexOf(`\n## ${heading}\n`);
    expect(start).toBeGreaterThan(0);
    const end = readme.indexOf('\n## ', start + 1);
    return readme.slice(start, end < 0 ? undefined : end);
  };
  let browser: Browser | undefined;
  let gateway: MainProcess | undefined;
  let shell: Shell | undefined;

  afterAll(async () => {
    shell?.close();
    await browser?.close();
    if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
  });

  it('quick start: npm start on a fresh DATA_DIR, then every step of the first hour ends as the README says', async () => {
    const quickStart = sectionOf('Quick start');
    const firstHour = sectionOf('The first hour');
    expect(blocksOf(quickStart).filter((b) => b.kind === 'bash')).toEqual([
      { kind: 'bash', text: 'npm install && npm start\n' },
    ]);

    // A clone's directory: every user may enter it (as root, the embedded Postgres runs as the postgres user).
    const clone = mkdtempSync(path.join(tmpdir(), 'rg-readme-'));
    chmodSync(clone, 0o755);
    const dataDir = path.join(clone, '.data');
    const port = await freePort();
    const hookPort = await freePort();
    const localize = (text: string) =>
      text
        .replace(/localhost:3000/g, `localhost:${port}`)
        .replace(/localhost:4000/g, `localhost:${hookPort}`)
        .replace(/webhook-receiver\.mjs 4000/g, `webhook-receiver.mjs ${hookPort}`)
        .replace(/cat \.data\//g, `cat ${dataDir}/`);
    const env = { DATA_DIR: dataDir, PORT: String(port) };

    gateway = runSrc('main.ts', env);
    await waitForOutput(gateway, /^Stop with Ctrl-C\.$/m, 90_000);
    const banner = blocksOf(quickStart).find((b) => b.kind === 'banner');
    expect(banner).toBeDefined();
    expectLinesInOrder(gateway.output(), localize(banner?.text ?? ''));

    shell = startShell();
    const background: string[] = [];
    let connectUrl: string | undefined;
    const steps = blocksOf(firstHour);
    expect(steps.map((s) => s.kind)).toEqual(
      expect.arrayContaining(['bash', 'browser', 'output', 'restart']),
    );
    for (const step of steps) {
      if (step.kind === 'bash') {
        for (const { commands, expected } of segmentsOf(localize(step.text))) {
          const { output, status } = await shell.run(commands);
          const lines = output.split('\n');
          background.push(...lines.filter(isBackgroundLine));
          const own = lines
            .filter((l) => !isBackgroundLine(l))
            .join('\n')
            .trim();
          const context = `\n$ ${commands}\n${own}`;
          expect({ status, context }).toEqual({ status: 0, context });
          if (expected !== undefined) expect(own).toMatch(wildcard(expected));
          connectUrl = /"connect_url":"([^"]+)"/.exec(own)?.[1] ?? connectUrl;
        }
      } else if (step.kind === 'browser') {
        expect(connectUrl).toBeDefined();
        await approveInBrowser((browser ??= await launchChromium()), connectUrl as string, step.text);
      } else if (step.kind === 'output') {
        for (const line of localize(step.text)
          .split('\n')
          .filter((l) => l.trim())) {
          const session = shell;
          await until(
            () => background.some((b) => wildcard(line).test(b)),
            `"${line}" among ${JSON.stringify(background)}`,
            () => background.push(...session.drain().split('\n').filter(isBackgroundLine)),
          );
        }
      }
    }

    // Ctrl-C, and `npm start` again: the banner's next step, as the README shows it.
    const restart = steps.find((s) => s.kind === 'restart');
    gateway.child.kill('SIGINT');
    expect(await gateway.exited).toBe(0);
    gateway = runSrc('main.ts', env);
    await waitForOutput(gateway, /^Stop with Ctrl-C\.$/m, 90_000);
    expectLinesInOrder(gateway.output(), localize(restart?.text ?? ''));
  }, 240_000);
});

type Block = { kind: 'bash' | 'browser' | 'output' | 'banner' | 'restart'; text: string };

/** The section's bash blocks and marked parts, in order. */
function blocksOf(section: string): Block[] {
  const blocks: Block[] = [];
  const pattern =
    /<!-- first-hour-test: (\w+) -->\n(?:```\w*\n([\s\S]*?)```|([\s\S]*?)(?:\n\n|$))|```bash\n([\s\S]*?)```/g;
  for (const m of section.matchAll(pattern)) {
    if (m[4] !== undefined) blocks.push({ kind: 'bash', text: m[4] });
    else blocks.push({ kind: m[1] as Block['kind'], text: m[2] ?? m[3] ?? '' });
  }
  return blocks;
}

/** A bash block cut before each `# → …` expectation (continued on `#   …` lines): the commands and what they print. */
function segmentsOf(block: string): { commands: string; expected?: string }[] {
  const segments: { commands: string; expected?: string }[] = [];
  let commands: string[] = [];
  let expected: string | undefined;
  const close = () => {
    if (commands.some((c) => c.trim() && !c.startsWith('#')) || expected !== undefined)
      segments.push({ commands: commands.join('\n'), expected });
    commands = [];
    expected = undefined;
  };
  for (const line of block.split('\n')) {
    if (line.startsWith('# → ')) expected = line.slice(4).trim();
    else if (expected !== undefined && /^# {2,}\S/.test(line)) expected += line.replace(/^# +/, '');
    else {
      if (expected !== undefined) close();
      commands.push(line);
    }
  }
  close();
  return segments;
}

/** An expected text as a whole-text pattern: `…` stands for anything. */
function wildcard(expected: string): RegExp {
  return new RegExp(
    `^${expected
      .split('…')
      .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[\\s\\S]*?')}$`,
  );
}

function expectLinesInOrder(output: string, expected: string): void {
  const lines = output.split('\n');
  let at = 0;
  for (const line of expected.split('\n').filter((l) => l.trim())) {
    const found = lines.findIndex((l, i) => i >= at && wildcard(line).test(l));
    expect({ line, found: found >= 0, output }).toEqual({ line, found: true, output });
    at = found + 1;
  }
}

const isBackgroundLine = (line: string) => /^webhook[ :]/.test(line);

/** The browser step: open the connect link, click each **bold** phrase but the last, land on the last as a heading. */
async function approveInBrowser(browser: Browser, connectUrl: string, paragraph: string): Promise<void> {
  const phrases = [...paragraph.matchAll(/\*\*([^*]+)\*\*/g)].map((m) => m[1]);
  expect(phrases.length).toBeGreaterThanOrEqual(2);
  const page = await browser.newPage();
  try {
    await page.goto(connectUrl);
    for (const phrase of phrases.slice(0, -1)) {
      // A link or a button with exactly that text; the click waits for it to appear on the page we are on.
      const named = { name: phrase, exact: true };
      await page.getByRole('link', named).or(page.getByRole('button', named)).click();
    }
    const landed = phrases.at(-1) as string;
    await page.locator('h1', { hasText: landed }).waitFor();
    expect(await page.textContent('h1')).toBe(landed);
  } finally {
    await page.close();
  }
}

async function until(
  test: () => boolean,
  what: string,
  refresh: () => void,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    refresh();
    if (test()) return;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Shell {
  /** Runs commands as typed; resolves with what they printed (stdout and stderr) and the last one's exit status. */
  run(commands: string): Promise<{ output: string; status: number }>;
  /** What background jobs printed since the last call. */
  drain(): string;
  close(): void;
}

/** One bash session, in the repository's directory, with only PATH and HOME from outside: a new terminal. */
function startShell(): Shell {
  const child: ChildProcess = spawn('bash', ['--noprofile', '--norc'], {
    cwd: ROOT,
    env: { PATH: shellPath(), HOME: process.env.HOME ?? '' },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  let buffer = '';
  child.stdout?.on('data', (d: Buffer) => (buffer += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (buffer += d.toString()));
  child.stdin?.write('exec 2>&1\n');
  let n = 0;
  return {
    async run(commands) {
      const marker = `@@rg-done-${++n}`;
      child.stdin?.write(`${commands}\nprintf '\\n${marker} %s\\n' "$?"\n`);
      const done = new RegExp(`\\n${marker} (\\d+)\\n`);
      const deadline = Date.now() + 60_000;
      while (!done.test(buffer)) {
        if (child.exitCode !== null) throw new Error(`bash exited: ${buffer}`);
        if (Date.now() > deadline) throw new Error(`no end of ${JSON.stringify(commands)}: ${buffer}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const m = done.exec(buffer) as RegExpExecArray;
      const output = buffer.slice(0, m.index);
      buffer = buffer.slice(m.index + m[0].length);
      return { output, status: Number(m[1]) };
    },
    drain() {
      const text = buffer;
      buffer = '';
      return text;
    },
    close() {
      try {
        process.kill(-(child.pid as number), 'SIGKILL'); // the session and its background jobs
      } catch {
        // gone already
      }
    },
  };
}
