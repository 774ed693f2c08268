import { rmSync } from 'node:fs';

export default async function globalTeardown() {
  const pg = globalThis.__EMBEDDED_PG__;
  if (pg) await pg.stop();
  if (process.env.RG_TEST_BUILD) rmSync(process.env.RG_TEST_BUILD, { recursive: true, force: true });
}
