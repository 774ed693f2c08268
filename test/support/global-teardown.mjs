import { rmSync } from 'node:fs';
import postgres from 'pg';

export default async function globalTeardown() {
  const embedded = globalThis.__EMBEDDED_PG__;
  if (embedded) await embedded.stop();
  else if (process.env.RG_TEST_TEMPLATE_DB) {
    const admin = new postgres.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${process.env.RG_TEST_TEMPLATE_DB} WITH (FORCE)`);
    await admin.end();
  }
  if (process.env.RG_TEST_BUILD) rmSync(process.env.RG_TEST_BUILD, { recursive: true, force: true });
}
