// Transpiles src/, migrations/ and test/support/ once per test run into a directory of its own (as ts-node's
// transpile-only mode would, file by file: tsconfig has isolatedModules), so the gateways, sandboxes, CLIs and workers
// the tests start as OS processes load plain JavaScript instead of each compiling the sources again at start-up.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ts = createRequire(import.meta.url)('typescript');

/** Returns the new directory; under the project's root, so that `node_modules` resolves as it does for the sources. */
export function transpileForProcesses() {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    path.join(ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  const compilerOptions = { ...parsed.options, sourceMap: false, inlineSourceMap: false, declaration: false };
  mkdirSync(path.join(ROOT, '.test-build'), { recursive: true });
  const out = mkdtempSync(path.join(ROOT, '.test-build', 'run-'));
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (file.endsWith('.ts') && !file.endsWith('.d.ts') && !/\.(e2e-|rel-)?spec\.ts$/.test(file)) {
        const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
          compilerOptions,
          fileName: file,
        });
        const target = path.join(out, path.relative(ROOT, file)).replace(/\.ts$/, '.js');
        mkdirSync(path.dirname(target), { recursive: true });
        writeFileSync(target, outputText);
      }
    }
  };
  for (const dir of ['src', 'migrations', 'test/support']) walk(path.join(ROOT, dir));
  return out;
}
