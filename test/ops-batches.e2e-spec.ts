import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import request from 'supertest';
import { AUTH_FAILURES_ALLOWED } from '../src/tenants/auth/auth-throttle';
import { RUNNING_BATCHES_SQL } from '../src/ops/running-batches';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { sqlOn } from './support/database';
import { createTenant, op } from './support/connect';

type RewardStatus = 'pending' | 'sending' | 'sent' | 'pending_approval' | 'failed' | 'cancelled';

/**
 * The /ops dashboard: the browser's Basic login (and the Bearer key beside it), and the running batches — inserted
 * here with SQL, as the batch API would leave them, since the dashboard only reads these tables.
 */
describe('ops dashboard: Basic login and running batches', () => {
  let t: TestApp;
  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const operator = () => t.config.operatorApiKey;
  const dashboard = () => request(t.baseUrl).get('/ops').auth('anyone', operator()).expect(200);

  /** A dispatch with its rewards, created `secondsAgo` ago; never due for the workers (retry and lease far away). */
  async function dispatch(
    tenant: string,
    status: 'queued' | 'sending' | 'sent' | 'failed' | 'partially_failed' | 'cancelled',
    rewards: RewardStatus[],
    secondsAgo: number,
    extra: { rewardCount?: number; priority?: 0 | 1; cancelRequested?: boolean } = {},
  ): Promise<string> {
    const id = randomUUID();
    await sql(
      `INSERT INTO reward_dispatches (id, tenant_id, environment, idempotency_key, request_hash, request,
                                      upstream_payload, status, order_shape, reward_count, priority, created_at,
                                      next_attempt_at, lease_until, cancel_requested_at)
       VALUES ($1::uuid, $2, 'sandbox', $8, repeat('0', 64), '{}', '{}', $3, 'single', $4, $5,
               now() - make_interval(secs => $6), now() + interval '1 day', now() + interval '1 day',
               CASE WHEN $7 THEN now() END)`,
      [
        id,
        tenant,
        status,
        extra.rewardCount ?? rewards.length,
        extra.priority ?? 1,
        secondsAgo,
        extra.cancelRequested ?? false,
        `key-${id}`,
      ],
    );
    if (rewards.length) {
      await sql(
        `INSERT INTO dispatch_rewards (dispatch_id, position, external_id, status, upstream_payload)
         SELECT $1::uuid, s.i - 1, $3 || '-r' || (s.i - 1), s.status, '{}'
           FROM unnest($2::text[]) WITH ORDINALITY AS s(status, i)`,
        [id, rewards, id],
      );
    }
    return id;
  }

  const repeat = <T>(value: T, n: number): T[] => Array.from({ length: n }, () => value);

  beforeAll(async () => {
    // No background work on the rows inserted below: no polling of due dispatches, no probes.
    t = await startTestApp({ LOG_LEVEL: 'silent', DISPATCH_POLL_MS: '60000', OPS_PROBE_INTERVAL_MS: '0' });
    await createTenant(t, 'acme');
    await createTenant(t, 'globex');
  });
  afterAll(async () => {
    await t.close();
  });

  describe('login', () => {
    it('answers 401 with a Basic challenge without credentials, so a browser shows its login prompt', async () => {
      const res = await request(t.baseUrl).get('/ops').set('Accept', 'text/html').expect(401);
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm="Rewards Gateway ops"(,|$)/);
      expect(res.text).not.toContain(operator());
    });

    it('takes Basic with any user name and the operator key as password, and still the Bearer key', async () => {
      for (const user of ['ops', 'anyone', '']) {
        const res = await request(t.baseUrl).get('/ops').auth(user, operator()).expect(200);
        expect(res.text).toContain('<h2>Running batches</h2>');
      }
      await request(t.baseUrl).get('/ops').set(op).expect(200);
      // No user name and no colon at all (`Basic base64(key)`): the whole value is the password.
      await request(t.baseUrl)
        .get('/ops')
        .set('Authorization', `Basic ${Buffer.from(operator()).toString('base64')}`)
        .expect(200);
    });

    it('refuses a wrong password with the challenge again (the browser asks again)', async () => {
      for (const password of [`${operator()}x`, operator().slice(0, -1), 'short', '']) {
        const res = await request(t.baseUrl).get('/ops').auth('ops', password).expect(401);
        expect(res.headers['www-authenticate']).toMatch(/^Basic realm="Rewards Gateway ops"/);
      }
      // Basic is for the dashboard only: the API still wants a Bearer key.
      await request(t.baseUrl).get('/v1/ops/connections').auth('ops', operator()).expect(401);
    });
  });

  describe('running batches', () => {
    let shown: string[];
    let mixed: string;
    let cancelling: string;

    beforeAll(async () => {
      // Not running: finished, a single reward, or an interactive send of one reward.
      await dispatch('acme', 'sent', ['sent', 'sent', 'sent'], 5);
      await dispatch('acme', 'partially_failed', ['sent', 'failed'], 5);
      await dispatch('acme', 'queued', ['pending'], 1, { priority: 0 });
      await dispatch('acme', 'sending', ['sending'], 1);
      // Running, oldest first: 22 plain batches, then two with something to show.
      const plain: string[] = [];
      for (let i = 0; i < 22; i++) {
        plain.push(
          await dispatch(
            i % 2 ? 'acme' : 'globex',
            i % 3 ? 'queued' : 'sending',
            ['pending', 'pending'],
            600 - i,
          ),
        );
      }
      mixed = await dispatch(
        'globex',
        'sending',
        [
          ...repeat<RewardStatus>('sent', 5),
          'pending_approval',
          ...repeat<RewardStatus>('failed', 2),
          'cancelled',
          'sending',
          ...repeat<RewardStatus>('pending', 10),
        ],
        20,
      );
      // A batch whose reward rows are not all written yet (reward_count 50), a cancel requested, interactive.
      cancelling = await dispatch('acme', 'queued', ['sent', 'pending'], 10, {
        rewardCount: 50,
        priority: 0,
        cancelRequested: true,
      });
      shown = [cancelling, mixed, ...plain.reverse()].slice(0, 20);
    });

    it('shows the newest 20 queued or sending dispatches of more than one reward, newest first', async () => {
      const page = await dashboard();
      const ids = [...page.text.matchAll(/<tr data-dispatch="([0-9a-f-]{36})"/g)].map((m) => m[1]);
      expect(ids).toEqual(shown);
    });

    it('shows tenant, dispatch id, created time and a progress bar from the rewards by status', async () => {
      const page = (await dashboard()).text;
      const row = (id: string) => {
        const start = page.indexOf(`<tr data-dispatch="${id}"`);
        return page.slice(start, page.indexOf('</tr>', start));
      };
      const created = (await sql(`SELECT created_at FROM reward_dispatches WHERE id = $1`, [mixed]))[0]
        .created_at as Date;
      const m = row(mixed);
      expect(m).toContain('data-tenant="globex"');
      expect(m).toContain('<strong>Tenant globex</strong>');
      expect(m).toContain(`<code>${mixed}</code>`);
      expect(m).toContain(`<time datetime="${created.toISOString()}">`);
      expect(m).toContain('bulk');
      // 20 rewards: 9 done (5 sent, 1 held for approval, 2 failed, 1 cancelled), 1 sending, 10 pending.
      expect(m).toMatch(/<progress value="9" max="20"[^>]*>45 %<\/progress>/);
      expect(m).toContain('9 / 20 done (45 %)');
      expect(m.replace(/<[^>]+>/g, '')).toContain(
        '5 sent · 1 awaiting approval · 2 failed · 1 cancelled · 1 sending · 10 pending',
      );

      const c = row(cancelling);
      expect(c).toContain('<progress value="1" max="50"');
      expect(c).toContain('interactive');
      expect(c).toContain('cancel requested');

      const plain = row(shown[2]);
      expect(plain).toContain('<progress value="0" max="2"');
      expect(plain).toContain('2 pending');
    });

    it('escapes what comes from tenants', async () => {
      await sql(`UPDATE tenants SET name = '<b onmouseover=x>Globex & Co</b>' WHERE id = 'globex'`);
      try {
        const page = (await dashboard()).text;
        expect(page).toContain('<strong>&lt;b onmouseover=x&gt;Globex &amp; Co&lt;/b&gt;</strong>');
        expect(page).not.toContain('<b onmouseover');
      } finally {
        await sql(`UPDATE tenants SET name = 'Tenant globex' WHERE id = 'globex'`);
      }
    });

    it('only reads: the dispatches and their rewards are left as they were', async () => {
      const before = await sql(
        `SELECT d.id, d.status, d.updated_at, array_agg(r.status || r.updated_at::text ORDER BY r.position) AS r
           FROM reward_dispatches d LEFT JOIN dispatch_rewards r ON r.dispatch_id = d.id GROUP BY d.id ORDER BY d.id`,
      );
      await dashboard();
      const after = await sql(
        `SELECT d.id, d.status, d.updated_at, array_agg(r.status || r.updated_at::text ORDER BY r.position) AS r
           FROM reward_dispatches d LEFT JOIN dispatch_rewards r ON r.dispatch_id = d.id GROUP BY d.id ORDER BY d.id`,
      );
      expect(after).toEqual(before);
    });

    it('reads the dispatches from the partial index and counts rewards on the primary key only', async () => {
      // Planner choices on a small table are not the point; with scans priced out, the plan shows which indexes fit.
      const client = new Client({ connectionString: t.databaseUrl });
      await client.connect();
      let plan: string;
      try {
        await client.query('SET enable_seqscan = off');
        await client.query('SET enable_bitmapscan = off');
        const rows = (await client.query(`EXPLAIN ${RUNNING_BATCHES_SQL}`, [20])).rows as Record<
          string,
          string
        >[];
        plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      } finally {
        await client.end();
      }
      expect(plan).toMatch(/Index Scan Backward using reward_dispatches_running_idx on reward_dispatches/);
      expect(plan).toMatch(/Limit/);
      expect(plan).toMatch(/using dispatch_rewards_pkey on dispatch_rewards/);
      expect(plan).not.toMatch(/Seq Scan on (reward_dispatches|dispatch_rewards)/);
    });

    it('says so when no batch is running', async () => {
      await sql(`UPDATE reward_dispatches SET status = 'sent' WHERE status IN ('queued', 'sending')`);
      const page = (await dashboard()).text;
      expect(page).toContain('No batches running.');
      expect(page).not.toContain('<tr data-dispatch=');
    });
  });

  // Last: it blocks this client's address for a minute.
  it('counts wrong passwords in the auth throttle: 429 once the limit is passed', async () => {
    let status = 401;
    let attempts = 0;
    while (status === 401 && attempts < AUTH_FAILURES_ALLOWED + 5) {
      status = (await request(t.baseUrl).get('/ops').auth('ops', `wrong-password-${attempts}-xxxxxxxxxxxx`))
        .status;
      attempts += 1;
    }
    expect(status).toBe(429);
    // The wrong passwords of the tests above counted too.
    expect(attempts).toBeLessThanOrEqual(AUTH_FAILURES_ALLOWED + 1);
    expect(attempts).toBeGreaterThan(AUTH_FAILURES_ALLOWED - 5);
    // The right password is refused too while the address is blocked.
    await request(t.baseUrl).get('/ops').auth('ops', operator()).expect(429);
  });
});
