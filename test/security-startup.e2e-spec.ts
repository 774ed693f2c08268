import { mkdtempSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { freePort } from './support/app';
import { createTestDatabase } from './support/database';
import { runSrc, waitForOutput } from './support/main-process';

describe('security: the operator key is never printed', () => {
  it('the start-up banner names the file that holds the generated key, not the key; the logs never show it', async () => {
    const db = await createTestDatabase();
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-banner-'));
    const port = await freePort();
    const gateway = runSrc('main.ts', {
      DATABASE_URL: db.url,
      VAULT_KEYS: `banner:${randomBytes(32).toString('base64')}`,
      DATA_DIR: dataDir,
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      LOG_LEVEL: 'debug',
      OPS_PROBE_INTERVAL_MS: '0',
    });
    try {
      await waitForOutput(gateway, /First steps:[\s\S]*acme[\s\S]*Stop with Ctrl-C/);
      const keyFile = path.join(dataDir, 'operator-api-key');
      const key = readFileSync(keyFile, 'utf8').trim();
      expect(key).toMatch(/^rgo_[A-Za-z0-9_-]{43}$/);
      // Use the key (and a wrong one), so request logs would show it if anything logged it.
      const base = `http://127.0.0.1:${port}`;
      expect(
        (await fetch(`${base}/v1/tenants/nobody`, { headers: { Authorization: `Bearer ${key}` } })).status,
      ).toBe(404);
      expect(
        (
          await fetch(`${base}/ops`, {
            headers: { Authorization: `Basic ${Buffer.from(`ops:${key}`).toString('base64')}` },
          })
        ).status,
      ).toBe(200);
      expect(
        (await fetch(`${base}/v1/tenants/nobody`, { headers: { Authorization: `Bearer ${key}x` } })).status,
      ).toBe(401);
      await new Promise((r) => setTimeout(r, 300));

      const output = gateway.output();
      expect(output).toContain(`Operator key:  in ${keyFile}`);
      expect(output).toContain(`export OPERATOR_KEY=$(cat ${keyFile})`);
      expect(output).not.toContain(key);
      expect(output).not.toContain(key.slice(4, 24)); // not even a part of it
      expect(output).toContain('"authorization":"[REDACTED]"'); // the request logs are there, redacted
    } finally {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
      await db.drop();
    }
  });

  it('with OPERATOR_API_KEY set, the banner says so and prints nothing of it', async () => {
    const db = await createTestDatabase();
    const port = await freePort();
    const key = `rgo_${randomBytes(24).toString('base64url')}`;
    const gateway = runSrc('main.ts', {
      DATABASE_URL: db.url,
      VAULT_KEYS: `banner:${randomBytes(32).toString('base64')}`,
      OPERATOR_API_KEY: key,
      DATA_DIR: mkdtempSync(path.join(tmpdir(), 'rg-banner-')),
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      OPS_PROBE_INTERVAL_MS: '0',
    });
    try {
      await waitForOutput(gateway, /First steps:[\s\S]*acme[\s\S]*Stop with Ctrl-C/);
      expect(gateway.output()).toContain('Operator key:  the value of OPERATOR_API_KEY');
      expect(gateway.output()).not.toContain(key);
    } finally {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
      await db.drop();
    }
  });
});
