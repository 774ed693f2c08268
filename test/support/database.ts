import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

/** The server the test run uses: the embedded one of global-setup, or TEST_DATABASE_URL. */
export function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: run the tests through jest (global setup)');
  return url;
}

/**
 * A fresh database for one test file: isolation without truncation. Returns its URL and a dropper. Empty, or with
 * `migrated`, a copy of the run's migrated template (global setup) when there is one.
 */
export async function createTestDatabase(
  options: { migrated?: boolean } = {},
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `rg_test_${randomBytes(6).toString('hex')}`;
  const template = options.migrated ? process.env.RG_TEST_TEMPLATE_DB : undefined;
  const admin = new Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`);
  await admin.end();
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new Client({ connectionString: adminUrl() });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

/** Runs one statement on a database and returns its rows (a short-lived connection: for assertions in tests). */
export async function sqlOn(
  url: string,
  text: string,
  params: unknown[] = [],
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<Record<string, any>[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, params)).rows;
  } finally {
    await client.end();
  }
}
