import { mkdtempSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { freePort } from './support/app';
import { connectByApproving } from './support/connect';
import { runSrc, waitForOutput } from './support/main-process';

/**
 * The demo as a newcomer runs it (`npm start`: embedded Postgres, built-in sandbox), stopped with SIGTERM right after
 * connecting — before the sandbox's periodic write — and started again on the same DATA_DIR: the connection works.
 */
describe('the demo restarted right after connecting', () => {
  it('keeps the tenant connected: the stop writes the sandbox state before Postgres goes down', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-demo-'));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = { DATA_DIR: dataDir, PORT: String(port), PUBLIC_BASE_URL: base, LOG_LEVEL: 'warn' };
    const first = runSrc('main.ts', env);
    await waitForOutput(first, /is running at/);
    const key = readFileSync(path.join(dataDir, 'operator-api-key'), 'utf8').trim();
    const api = (p: string, init: RequestInit = {}) =>
      fetch(`${base}${p}`, {
        ...init,
        headers: {
          Authorization: `Bearer ${key}`,
          'Content-Type': 'application/json',
          ...(init.headers ?? {}),
        },
      });
    await api('/v1/tenants', { method: 'POST', body: JSON.stringify({ id: 'demo', name: 'Demo' }) });
    const session = (await (
      await api('/v1/tenants/demo/connect-sessions', { method: 'POST', body: '{}' })
    ).json()) as { connect_url: string };
    const done = await connectByApproving(base, `${session.connect_url}/authorize`);
    expect(done.status).toBe(200);
    first.child.kill('SIGTERM'); // at once: the sandbox's periodic write has not run yet
    expect(await first.exited).toBe(0);

    const second = runSrc('main.ts', env);
    try {
      await waitForOutput(second, /is running at/);
      const body = JSON.stringify({
        rewards: [
          {
            recipient: { name: 'Ada', email: 'ada@example.com' },
            value: { denomination: 5, currency_code: 'USD' },
            products: ['PRODAMAZONUS'],
            custom_fields: { Department: 'Sales' },
          },
        ],
      });
      const sent = await api('/v1/tenants/demo/rewards', {
        method: 'POST',
        headers: { 'Idempotency-Key': 'after-restart' },
        body,
      });
      expect(sent.status).toBe(201);
      const connection = (await (await api('/v1/tenants/demo/connection')).json()) as { status: string };
      expect(connection.status).toBe('active');
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  }, 120_000);
});
