import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import * as path from 'node:path';

const ROOT = path.join(__dirname, '..');
const DOCS = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith('.md'),
);
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/** The Markdown of `file` without its fenced code blocks (links and headings are outside them). */
function prose(file: string): string {
  return read(file).replace(/^ *```[\s\S]*?^ *```/gm, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes; repeats get -1, -2, … */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of prose(file).matchAll(/^#{1,6} +(.+?) *#* *$/gm)) {
    const slug = heading
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\- _]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n ? `${slug}-${n}` : slug);
  }
  return anchors;
}

/** Every inline link and image target of `file`: `[text](target)`, `<https://…>`, and reference definitions. */
function linksOf(file: string): string[] {
  const text = prose(file).replace(/`[^`\n]*`/g, '');
  return [
    ...[...text.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?: "[^"]*")?\)/g)].map((m) => m[1]),
    ...[...text.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]+)>/gi)].map((m) => m[1]),
    ...[...text.matchAll(/^ {0,3}\[[^\]]+\]: +(\S+)/gm)].map((m) => m[1]),
  ];
}

/**
 * The README and docs/ stay a guide that works from a clone: every relative link and anchor resolves, no link leaves
 * the repository except to http(s) URLs, no file the repository does not have is named, lines stay readable.
 */
describe('README.md and docs/', () => {
  it.each(DOCS)(
    '%s: every link resolves inside the repository (files and #anchors); others are http(s) URLs',
    (file) => {
      const problems: string[] = [];
      for (const target of linksOf(file)) {
        if (/^https?:\/\//i.test(target)) continue;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
          problems.push(`${target}: a link leaving the repository other than http(s)`);
          continue;
        }
        const [pathPart, anchor] = target.split('#') as [string, string | undefined];
        const resolved = pathPart
          ? path.resolve(path.dirname(path.join(ROOT, file)), decodeURI(pathPart))
          : path.join(ROOT, file);
        if (path.isAbsolute(pathPart) || !resolved.startsWith(`${ROOT}${path.sep}`)) {
          problems.push(`${target}: outside the repository`);
          continue;
        }
        if (!existsSync(resolved)) {
          problems.push(`${target}: no such file`);
          continue;
        }
        if (anchor !== undefined) {
          const relative = path.relative(ROOT, resolved);
          if (!relative.endsWith('.md') || statSync(resolved).isDirectory())
            problems.push(`${target}: an anchor into a non-Markdown file`);
          else if (!anchorsOf(relative).has(anchor))
            problems.push(`${target}: no heading #${anchor} in ${relative}`);
        }
      }
      expect(problems).toEqual([]);
    },
  );

  it.each(DOCS)(
    '%s: names only files the repository has, and nothing outside it or of the issue tracker',
    (file) => {
      const text = read(file);
      const named = [...text.matchAll(/`((?:src|test|bench|scripts|examples|docs|migrations)\/[\w./-]+)`/g)]
        .map((m) => m[1].replace(/[.,]$/, ''))
        .filter((p) => !p.startsWith('test/artifacts')) // the browser tests' screenshots, not in a clone
        .filter((p) => !existsSync(path.join(ROOT, p)));
      expect(named).toEqual([]);
      expect(text).not.toMatch(
        /\.\.\/shared|\/work\/|table-owners\.mjs \.\.|\bissues? #?\d+|(^|[\s(])#\d+\b/im,
      );
    },
  );

  it.each(DOCS)('%s: no line over 200 characters, and no editing leftovers', (file) => {
    const long = read(file)
      .split('\n')
      .map((line, i) => ({ line: i + 1, length: [...line].length }))
      .filter((l) => l.length > 200);
    expect(long).toEqual([]);
    // HTML comments are only the markers the README's first-hour test reads.
    const comments = [...read(file).matchAll(/<!--([\s\S]*?)-->/g)].map((m) => m[1].trim());
    expect(comments.filter((c) => !/^first-hour-test: (banner|browser|output|restart)$/.test(c))).toEqual([]);
    // A table row needs its table: every block of `|` lines starts with a header and a `| --- |` separator.
    const lines = prose(file).split('\n');
    const orphans = lines
      .map((line, i) => ({ line, i }))
      .filter(({ line, i }) => line.startsWith('|') && !lines[i - 1]?.startsWith('|'))
      .filter(({ i }) => !/^\|( *:?-+:? *\|)+ *$/.test(lines[i + 1] ?? ''))
      .map(({ i }) => i + 1);
    expect(orphans).toEqual([]);
  });

  it('the README is a short guide; the details live in docs/, each file reachable from it', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(400);
    for (const doc of DOCS.filter((f) => f.startsWith('docs/'))) expect(readme).toContain(`](${doc})`);
  });

  it('docs/configuration.md has every variable the configuration reads', () => {
    const source = read('src/config/app-config.ts');
    // Every variable is a call's argument (`int('NAME', …)`, `raw('NAME')`, `firstSet('NAME', 'OLD_NAME')`); an
    // environment's own variables are `n('SUFFIX')` (REWARDS_<ENV>_SUFFIX).
    const variables = new Set<string>();
    for (const [, suffix, name] of source.matchAll(/(?:\b(n)\(|[(,])\s*'([A-Z][A-Z0-9_]*)'/g))
      variables.add(suffix ? `REWARDS_PRODUCTION_${name}` : name);
    expect(variables.size).toBeGreaterThan(45);
    const table = read('docs/configuration.md');
    const documented = ['PRODUCTION', 'SANDBOX'].map((env) => table.replace(/<ENV>/g, env)).join('\n');
    expect([...variables].filter((v) => !new RegExp(`\\b${v}\\b`).test(documented))).toEqual([]);
  });
});
