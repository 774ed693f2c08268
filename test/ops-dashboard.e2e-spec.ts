import { createHash } from 'node:crypto';
import { Client } from 'pg';
import request from 'supertest';
import { ACTIVITY_SQL } from '../src/ops/dashboard.data';
import { LOCAL_TIMES_SCRIPT, LOCAL_TIMES_SCRIPT_HASH } from '../src/ops/local-times';
import type { TestApp } from './support/app';
import { freePort, startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { sqlOn } from './support/database';
import { reward, send, waitFor } from './support/send';

/** The directives of a Content-Security-Policy header, by name. */
function csp(header: string | undefined): Record<string, string> {
  expect(header).toBeDefined();
  return Object.fromEntries(
    (header as string)
      .split(';')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => [d.split(/\s+/)[0], d.split(/\s+/).slice(1).join(' ')]),
  );
}

const attr = (html: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(html)?.[1];

/**
 * The /ops dashboard as the operator's picture: the summary of connections by status and health, the last hour's sends
 * and failures as inline SVG, the failing tenant webhook endpoints, times as `<time>` in UTC text, and the CSP that
 * allows its one script by hash. Connections, sends and webhook endpoints are made through the API; a few states the
 * API reaches only slowly (needs_reauth, error, idle, disabled) are set with SQL, since the dashboard only reads them.
 */
describe('ops dashboard: summary, last hour, failing webhook endpoints, local times', () => {
  let t: TestApp;
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const operator = () => t.config.operatorApiKey;
  const dashboard = async () =>
    (await request(t.baseUrl).get('/ops').auth('ops', operator()).expect(200)).text;
  const svgOf = (html: string) => html.slice(html.indexOf('<svg class="plot"'), html.indexOf('</svg>') + 6);

  beforeAll(async () => {
    t = await startTestApp({
      LOG_LEVEL: 'silent',
      OPS_PROBE_INTERVAL_MS: '0',
      // Tenant webhooks to a closed local port: private targets allowed, retries quick.
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_POLL_MS: '100',
      WEBHOOK_RETRY_SCHEDULE_MS: '200,400,800',
      WEBHOOK_TIMEOUT_MS: '1000',
      WEBHOOK_GIVE_UP_AFTER_MS: '600000',
      WEBHOOK_DISABLE_AFTER_MS: '600000',
    });
    await control(t, '/reset');
    await control(t, '/webhooks', { enabled: false });
    for (const tenant of ['fine', 'broke', 'shaky', 'slow', 'sleepy', 'gone']) {
      await createTenant(t, tenant);
      await connectTenant(t, tenant);
    }
    await request(t.baseUrl).delete('/v1/tenants/gone/connection').set(op).expect(200);
    await sql(
      `UPDATE connections SET status = 'needs_reauth' WHERE tenant_id = 'broke' AND status = 'active'`,
    );
    await sql(`UPDATE connections SET status = 'error' WHERE tenant_id = 'shaky' AND status = 'active'`);
    await sql(
      `UPDATE connections SET consecutive_failures = 2 WHERE tenant_id = 'slow' AND status = 'active'`,
    );
    await sql(
      `UPDATE connections SET connected_at = now() - interval '30 days', last_used_at = now() - interval '30 days'
        WHERE tenant_id = 'sleepy' AND status = 'active'`,
    );
  });
  afterAll(async () => {
    await t.close();
  });

  it('shows connections per status and per health at the top, as the table holds them', async () => {
    const page = await dashboard();
    expect(page.indexOf('id="summary"')).toBeLessThan(page.indexOf('id="activity"'));
    expect(page.indexOf('id="activity"')).toBeLessThan(page.indexOf('id="batches"'));
    expect(page.indexOf('id="batches"')).toBeLessThan(page.indexOf('id="webhooks"'));
    expect(page.indexOf('id="webhooks"')).toBeLessThan(page.indexOf('id="connections"'));
    const counts = (kind: string) =>
      Object.fromEntries(
        [...page.matchAll(new RegExp(`data-${kind}="([a-z_]+)" data-count="(\\d+)"`, 'g'))].map((m) => [
          m[1],
          Number(m[2]),
        ]),
      );
    expect(counts('status')).toEqual({ active: 3, needs_reauth: 1, error: 1, disconnected: 1 });
    expect(counts('health')).toEqual({ healthy: 1, degraded: 2, broken: 1, idle: 1 });
    // The same numbers as the database holds.
    const stored = await sql(`SELECT status, count(*)::int AS n FROM connections GROUP BY status`);
    for (const row of stored) expect(counts('status')[row.status as string]).toBe(row.n);
    // Each count links to the table filtered by it.
    expect(page).toContain('<a href="/ops?health=broken#connections">');

    // A change shows at once (the summary is read with the page, not from the 15 s metrics snapshot).
    await sql(
      `UPDATE connections SET consecutive_failures = 0 WHERE tenant_id = 'slow' AND status = 'active'`,
    );
    const after = await dashboard();
    expect(after).toContain('data-health="healthy" data-count="2"');
    expect(after).toContain('data-health="degraded" data-count="1"');
    await sql(
      `UPDATE connections SET consecutive_failures = 2 WHERE tenant_id = 'slow' AND status = 'active'`,
    );
  });

  it('plots an empty hour as 60 empty minutes', async () => {
    const svg = svgOf(await dashboard());
    expect(svg).toContain('role="img"');
    expect(svg).toContain('<title>Sends and failures per minute, last hour</title>');
    expect(attr(svg, 'aria-label')).toBe('Rewards per minute over the last hour: 0 sent, 0 failed.');
    expect(attr(svg, 'data-sent-total')).toBe('0');
    expect(attr(svg, 'viewBox')).toBe('0 0 480 180');
    expect(attr(svg, 'points')?.split(' ')).toHaveLength(60);
    expect(svg).not.toContain('<rect');
  });

  describe('with sends, failures and a failing webhook endpoint', () => {
    let endpointId: string;
    let endpointUrl: string;

    beforeAll(async () => {
      // A tenant endpoint on a port nobody listens on: every delivery fails (connection refused).
      endpointUrl = `http://127.0.0.1:${await freePort()}/hooks/rewards?team=ops&kind=<all>`;
      const created = await request(t.baseUrl)
        .post('/v1/tenants/fine/webhooks')
        .set(op)
        .send({ url: endpointUrl, events: ['*'] })
        .expect(201);
      endpointId = created.body.id as string;
      endpointUrl = created.body.url as string;
      await send(t, 'fine', 'dash-sent-1', {
        rewards: [
          reward(),
          reward({ recipient: { name: 'B', email: 'b@example.com' } }),
          reward({ recipient: { name: 'C', email: 'c@example.com' } }),
        ],
      }).expect(201);
      await send(t, 'fine', 'dash-sent-2', {
        rewards: [reward({ recipient: { name: 'D', email: 'd@example.com' } })],
      }).expect(201);
      await send(t, 'fine', 'dash-failed-1', { rewards: [reward({ products: ['PRODUNKNOWN'] })] }).expect(
        422,
      );
      await waitFor(
        async () =>
          (await request(t.baseUrl).get(`/v1/tenants/fine/webhooks/${endpointId}`).set(op).expect(200)).body,
        (w) => w.status === 'failing' && w.consecutive_failures >= 1,
      );
    });

    it('plots the sends and the failure in their minute, with the totals in the aria-label', async () => {
      const minutes = await sql(
        `SELECT date_trunc('minute', sent_at) AS minute, count(*)::int AS n FROM dispatch_rewards
          WHERE sent_at IS NOT NULL GROUP BY 1`,
      );
      const svg = svgOf(await dashboard());
      expect(attr(svg, 'aria-label')).toBe(
        'Rewards per minute over the last hour: 4 sent, 1 failed; at most ' +
          `${Math.max(...minutes.map((m) => m.n as number))} sent in one minute.`,
      );
      expect(attr(svg, 'data-sent-total')).toBe('4');
      expect(attr(svg, 'data-failed-total')).toBe('1');
      const bars = [...svg.matchAll(/<rect class="sent" data-minute="([^"]+)" data-count="(\d+)"/g)];
      expect(Object.fromEntries(bars.map((b) => [b[1], Number(b[2])]))).toEqual(
        Object.fromEntries(minutes.map((m) => [(m.minute as Date).toISOString(), m.n])),
      );
      const [failedAt] = await sql(
        `SELECT date_trunc('minute', updated_at) AS minute FROM dispatch_rewards WHERE status = 'failed'`,
      );
      expect(svg).toContain(
        `<circle class="failed" data-minute="${(failedAt.minute as Date).toISOString()}" data-count="1"`,
      );
      expect(attr(svg, 'points')?.split(' ')).toHaveLength(60);
    });

    it('puts each send in its own minute and leaves out what is older than the hour', async () => {
      // Move one send 30 minutes back and one 61 minutes back (out of the window).
      const [moved] = await sql(
        `WITH r AS (SELECT dispatch_id, position FROM dispatch_rewards WHERE sent_at IS NOT NULL ORDER BY dispatch_id, position LIMIT 2),
              a AS (UPDATE dispatch_rewards d SET sent_at = now() - interval '30 minutes'
                      FROM (SELECT * FROM r LIMIT 1) x WHERE d.dispatch_id = x.dispatch_id AND d.position = x.position
                    RETURNING date_trunc('minute', d.sent_at) AS minute),
              b AS (UPDATE dispatch_rewards d SET sent_at = now() - interval '61 minutes'
                      FROM (SELECT * FROM r OFFSET 1) x WHERE d.dispatch_id = x.dispatch_id AND d.position = x.position
                    RETURNING 1)
         SELECT (SELECT minute FROM a) AS minute, (SELECT count(*) FROM b)::int AS old`,
      );
      expect(moved.old).toBe(1);
      const svg = svgOf(await dashboard());
      expect(attr(svg, 'data-sent-total')).toBe('3');
      // Its bar, 30 minutes back (31 if the minute turned since the update).
      expect(svg).toMatch(
        new RegExp(
          `<rect class="sent" data-minute="${(moved.minute as Date).toISOString()}" data-count="1"[^>]*><title>1 sent, 3[01] min ago</title>`,
        ),
      );
    });

    it('reads the last hour from the two partial indexes, never a scan of dispatch_rewards', async () => {
      const client = new Client({ connectionString: t.databaseUrl });
      await client.connect();
      let plan: string;
      try {
        await client.query('SET enable_seqscan = off');
        const rows = (await client.query(`EXPLAIN ${ACTIVITY_SQL}`)).rows as Record<string, string>[];
        plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      } finally {
        await client.end();
      }
      expect(plan).toMatch(/dispatch_rewards_sent_at_idx/);
      expect(plan).toMatch(/dispatch_rewards_failed_at_idx/);
      expect(plan).not.toMatch(/Seq Scan on dispatch_rewards/);
    });

    it('lists the failing tenant webhook endpoints: tenant, escaped url, failing since, failures, disabled or not', async () => {
      // A second endpoint, disabled (as the worker leaves one after WEBHOOK_DISABLE_AFTER_MS of failures).
      const other = await request(t.baseUrl)
        .post('/v1/tenants/shaky/webhooks')
        .set(op)
        .send({ url: 'http://127.0.0.1:9/gone', events: ['connection.recovered'] })
        .expect(201);
      await sql(
        `UPDATE webhook_endpoints SET failing_since = now() - interval '3 days', consecutive_failures = 57,
                disabled_at = now() - interval '1 hour', disabled_reason = 'failing continuously <since> 3 days',
                last_error = 'connect ECONNREFUSED'
          WHERE id = $1`,
        [other.body.id],
      );
      const page = await dashboard();
      const section = page.slice(page.indexOf('id="webhooks"'), page.indexOf('id="connections"'));
      const rows = [...section.matchAll(/<tr data-endpoint="([0-9a-f-]{36})"/g)].map((m) => m[1]);
      expect(rows).toEqual([other.body.id, endpointId]); // disabled first
      const row = (id: string) => {
        const start = section.indexOf(`<tr data-endpoint="${id}"`);
        return section.slice(start, section.indexOf('</tr>', start));
      };

      const stored = (
        await request(t.baseUrl).get(`/v1/tenants/fine/webhooks/${endpointId}`).set(op).expect(200)
      ).body;
      const failing = row(endpointId);
      expect(failing).toContain('data-tenant="fine"');
      expect(failing).toContain('class="failing"');
      expect(endpointUrl).toContain('&');
      expect(failing).toContain(
        `<code>${endpointUrl.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}</code>`,
      );
      expect(failing).not.toContain(endpointUrl);
      expect(failing).toContain(`<time datetime="${stored.failing_since}">`);
      const shown = Number(/<td class="failures"[^>]*>(\d+)<\/td>/.exec(failing)?.[1]);
      expect(shown).toBeGreaterThanOrEqual(1);
      expect(failing).toContain('failing, retrying');
      expect(failing).not.toContain('disabled');

      const disabled = row(other.body.id);
      expect(disabled).toContain('data-tenant="shaky"');
      expect(disabled).toContain('class="disabled"');
      expect(disabled).toContain('<td class="failures" data-label="Consecutive failures">57</td>');
      expect(disabled).toContain('<strong>disabled</strong>');
      expect(disabled).toContain('failing continuously &lt;since&gt; 3 days');
      expect(disabled).toContain('last error: connect ECONNREFUSED');
    });
  });

  it('renders every time as <time datetime="ISO"> with its UTC text, correct without script', async () => {
    const page = await dashboard();
    const times = [...page.matchAll(/<time datetime="([^"]+)">([^<]*)<\/time>/g)];
    expect(times.length).toBeGreaterThan(5);
    for (const [, iso, text] of times) {
      expect(iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(text).toBe(`${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`);
    }
    expect(page).toContain('Times in <span id="tz">UTC</span>');
  });

  it('CSP of /ops: still default-src none, plus its one inline script by hash; other pages run no script', async () => {
    const res = await request(t.baseUrl).get('/ops').auth('ops', operator()).expect(200);
    const policy = csp(res.headers['content-security-policy']);
    const scripts = [...res.text.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts).toHaveLength(1);
    expect(scripts[0][1]).toBe(''); // inline, no src
    expect(scripts[0][2]).toBe(LOCAL_TIMES_SCRIPT);
    const hash = `'sha256-${createHash('sha256').update(scripts[0][2]).digest('base64')}'`;
    expect(hash).toBe(LOCAL_TIMES_SCRIPT_HASH);
    expect(policy).toEqual({
      'default-src': "'none'",
      'script-src': hash,
      'style-src': "'unsafe-inline'",
      'form-action': "'self'",
      'frame-ancestors': "'none'",
      'base-uri': "'none'",
    });
    expect(res.text).not.toMatch(/<link|<img|<iframe|\son[a-z]+=/i);
    // Only /ops: the start page, the 401 answer and the API keep the policy without script.
    for (const other of [
      await request(t.baseUrl).get('/'),
      await request(t.baseUrl).get('/v1/tenants/fine').set(op).expect(200),
      await request(t.baseUrl).get('/ops/connections'),
    ]) {
      const p = csp(other.headers['content-security-policy']);
      expect(p['script-src']).toBeUndefined();
      expect(p['default-src']).toBe("'none'");
    }
  });
});
