#!/usr/bin/env node
// One store per table: every statement that writes a table lives in one file (its store). This lists, for each table
// the migrations create, the source files under src/ whose SQL writes it (INSERT INTO, UPDATE, DELETE FROM, TRUNCATE),
// and exits with 1 when a table has more than one. Tables written through a library (a TypeORM repository, the
// authentication throttle's store) show no file: their one writer is named in docs/architecture.md.
//
//   node scripts/table-owners.mjs        (from the project's root)
import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';

const root = process.cwd();
const files = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? files(path.join(dir, entry.name)) : [path.join(dir, entry.name)],
  );

const tables = new Set();
for (const file of files(path.join(root, 'migrations')))
  for (const m of readFileSync(file, 'utf8').matchAll(/CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)"?/gi))
    tables.add(m[1].toLowerCase());

const sources = files(path.join(root, 'src')).filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'));
const writers = new Map([...tables].sort().map((table) => [table, []]));
for (const file of sources) {
  const text = readFileSync(file, 'utf8');
  for (const [table, found] of writers) {
    const write = new RegExp(`\\b(INSERT\\s+INTO|UPDATE|DELETE\\s+FROM|TRUNCATE(\\s+TABLE)?)\\s+"?${table}"?\\b`, 'i');
    if (write.test(text)) found.push(path.relative(root, file));
  }
}
let shared = 0;
for (const [table, found] of writers) {
  if (found.length > 1) shared++;
  console.log(`${found.length > 1 ? 'SHARED' : 'ok    '} ${table}: ${found.join(', ') || '(through a library)'}`);
}
console.log(shared ? `${shared} table(s) written from more than one file` : `every table has one writer`);
process.exit(shared ? 1 : 0);
