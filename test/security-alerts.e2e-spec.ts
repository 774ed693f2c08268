import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AlertsService } from '../src/ops/alerts.service';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { sqlOn } from './support/database';

interface Local {
  url: string;
  hits: { method: string; url: string }[];
  close(): Promise<void>;
}

async function listen(
  handler: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void,
): Promise<Local> {
  const hits: Local['hits'] = [];
  const server: Server = createServer((req, res) => {
    hits.push({ method: req.method ?? '', url: req.url ?? '' });
    req.resume();
    req.on('end', () => handler(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe('security: alert webhooks do not follow redirects', () => {
  let t: TestApp;
  let elsewhere: Local; // a server the redirect points at: it must never see a request
  let receiver: Local; // OPS_WEBHOOK_URL: answers with a redirect (the status of the current test)
  let redirectStatus = 302;
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);

  beforeAll(async () => {
    elsewhere = await listen((_req, res) => res.end('ok'));
    receiver = await listen((_req, res) => {
      res.writeHead(redirectStatus, { Location: `${elsewhere.url}/internal/steal` });
      res.end();
    });
    t = await startTestApp({
      OPS_WEBHOOK_URL: `${receiver.url}/hook`,
      OPS_WEBHOOK_SECRET: 'webhook-secret-for-tests-0123456789',
      OPS_PROBE_INTERVAL_MS: '0',
    });
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
    await elsewhere.close();
  });

  it.each([302, 301, 303, 307, 308])(
    'a %i from the receiver is a failed delivery (retried later), never followed: 0 hits elsewhere',
    async (status) => {
      redirectStatus = status;
      const [{ id }] = await sql(
        `INSERT INTO ops_alerts (connection_id, kind, payload) VALUES (NULL, 'connection.broken', '{"event":"connection.broken"}') RETURNING id`,
      );
      const alerts = t.app.get(AlertsService);
      const before = receiver.hits.length;
      for (let attempt = 0; attempt < 2; attempt++) {
        await sql(`UPDATE ops_alerts SET next_attempt_at = now() WHERE id = $1`, [id]);
        expect(await alerts.deliverDue()).toBe(0);
      }
      expect(receiver.hits.length - before).toBeGreaterThanOrEqual(2);
      expect(receiver.hits.at(-1)).toEqual({ method: 'POST', url: '/hook' });
      expect(elsewhere.hits).toEqual([]);
      const [row] = await sql(
        `SELECT delivered_at, attempts, last_error, next_attempt_at > now() AS later FROM ops_alerts WHERE id = $1`,
        [id],
      );
      expect(row).toMatchObject({ delivered_at: null, later: true });
      expect(row.attempts).toBeGreaterThanOrEqual(2);
      expect(row.last_error).toBe(`receiver answered ${status} (a redirect; redirects are not followed)`);
      await sql(`UPDATE ops_alerts SET delivered_at = now() WHERE id = $1`, [id]); // out of the next case's way
    },
  );
});
