import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { closeApp, createApp } from '../../src/app.factory';
import type { Clock } from '../../src/common/clock';
import type { AppConfig } from '../../src/config/app-config';
import { parseConfig } from '../../src/config/app-config';
import { runMigrations } from '../../src/database/migrator';
import { createTestDatabase } from './database';

export const OPERATOR_KEY = `rgo_test_${'x'.repeat(40)}`;

export interface TestApp {
  app: NestFastifyApplication;
  config: AppConfig;
  baseUrl: string;
  databaseUrl: string;
  /** Every structured log line written so far, as raw text. */
  logs: string[];
  close(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        address && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

export function testEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    OPERATOR_API_KEY: OPERATOR_KEY,
    VAULT_KEYS: `test1:${randomBytes(32).toString('base64')}`,
    LOG_LEVEL: 'info',
    SANDBOX_CONTROL_ENABLED: 'true',
    // The service's 10 requests/s per account is on in the demo; tests that test it turn it on through /__control.
    SANDBOX_RATE_LIMIT_RPS: '0',
    // Pacing off unless a test turns it on (test/pacing*): the sandbox does not limit either.
    REWARDS_SANDBOX_RATE_LIMIT_RPS: '0',
    // The retention job runs when a test says so (RetentionJob.run) or deletes a tenant, not on its own timer.
    RETENTION_INTERVAL_MS: '86400000',
    DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-data-')),
    ...extra,
  };
}

export interface TestAppOptions {
  /** Runs on the app after it is built, before it listens (e.g. to add a global step, as test/pipeline does). */
  configure?: (app: NestFastifyApplication) => void;
  /** The clock the app reads time from (test/support/clock.ts), to move time instead of waiting. */
  clock?: Clock;
}

/** Starts the real gateway on a fresh database and a free port, with the sandbox mounted unless told otherwise. */
export async function startTestApp(
  extraEnv: Record<string, string> = {},
  options: TestAppOptions = {},
): Promise<TestApp> {
  const db = await createTestDatabase({ migrated: true });
  const app = await startTestAppOn(db.url, extraEnv, options);
  return {
    ...app,
    close: async () => {
      await app.close();
      await db.drop().catch(() => undefined);
    },
  };
}

/** Another gateway instance on an existing database (several instances, one Postgres). `close` leaves the database. */
export async function startTestAppOn(
  databaseUrl: string,
  extraEnv: Record<string, string> = {},
  options: TestAppOptions = {},
): Promise<TestApp> {
  const db = { url: databaseUrl };
  const port = await freePort();
  const config = parseConfig(
    testEnv({
      DATABASE_URL: db.url,
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      ...extraEnv,
    }),
  );
  await runMigrations(db.url);
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const app = await createApp(config, { logDestination: sink, clock: options.clock });
  options.configure?.(app);
  await app.listen(port, '127.0.0.1');
  return {
    app,
    config,
    baseUrl: `http://127.0.0.1:${port}`,
    databaseUrl: db.url,
    logs,
    close: async () => {
      await closeApp(app);
    },
  };
}
