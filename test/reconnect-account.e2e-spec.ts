import { SchedulerRegistry } from '@nestjs/schedule';
import request from 'supertest';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { sqlOn } from './support/database';
import {
  RETURN_URL,
  approve,
  connectTenant,
  control,
  createTenant,
  op,
  startConnect,
} from './support/connect';
import { reward, send } from './support/send';

/**
 * A connection stays on the rewards organization it was first connected to: a re-consent (a tenant with a live
 * connection connecting again) that authorizes another organization is refused, unless the tenant disconnected first.
 * Over real HTTP, through the sandbox's consent page (which offers its two accounts) and Postgres.
 */
describe('reconnecting: a connection keeps its rewards organization', () => {
  let t: TestApp;
  let demo: { id: string; name: string };
  let other: { id: string; name: string };
  beforeAll(async () => {
    t = await startTestApp();
    // The alerts counted here are the account check's own; the background alert pass (every 2 s) would add the broken
    // connection's `connection.broken` whenever it happened to run between the break and the count.
    t.app.get(SchedulerRegistry).deleteInterval('ops-alerts');
  });
  afterAll(async () => {
    await t.close();
  });
  beforeEach(async () => {
    await control(t, '/reset');
    const accounts = (await request(t.baseUrl).get('/sandbox/__control/accounts').expect(200)).body
      .accounts as { id: string; name: string; organization_id: string }[];
    const org = (id: string) => {
      const a = accounts.find((x) => x.id === id) as (typeof accounts)[number];
      return { id: a.organization_id, name: a.name };
    };
    demo = org('acc_demo');
    other = org('acc_other');
  });

  const sql = (text: string, params: unknown[] = []) => sqlOn(t.databaseUrl, text, params);
  const connection = async (tenant: string) =>
    (await request(t.baseUrl).get(`/v1/tenants/${tenant}/connection`).set(op).expect(200)).body;
  const ordersOf = async (accountId: string) =>
    (await request(t.baseUrl).get(`/sandbox/__control/orders?account_id=${accountId}`).expect(200)).body
      .orders as { id: string; external_id: string }[];

  /** The admin's walk through a new connect link, approving as `accountId`; returns the callback's answer. */
  async function connectAs(
    tenant: string,
    accountId: string,
    body: Record<string, unknown> = { return_url: RETURN_URL },
  ) {
    const started = await startConnect(t, tenant, body);
    const callback = await approve(t, started.upstream, 'approve', accountId);
    const done = await request(t.baseUrl).get(callback).set('Cookie', started.cookie);
    return { done, ...started };
  }

  /** Alerts about one tenant's connections (each test has its own tenant; the database is the file's). */
  const alertsOf = (tenant: string) =>
    sql(`SELECT connection_id, kind, payload FROM ops_alerts WHERE payload->>'tenant_id' = $1 ORDER BY id`, [
      tenant,
    ]);

  /** The demo account's holder revokes the app; the next refresh learns it: the connection needs a new consent. */
  async function breakConnection(tenant: string, connectionId: string) {
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    for (const grant of stats.grants as { id: string; account_id: string; revoked: boolean }[])
      if (grant.account_id === 'acc_demo' && !grant.revoked)
        await request(t.baseUrl).post(`/sandbox/__control/grants/${grant.id}/revoke`).send({}).expect(200);
    await t.app
      .get(AccessTokenProvider)
      .forceRefresh(connectionId)
      .catch(() => undefined);
    expect((await connection(tenant)).status).toBe('needs_reauth');
  }

  it('records the organization at the first connect', async () => {
    await createTenant(t, 'first');
    const id = await connectTenant(t, 'first');
    expect(await connection('first')).toMatchObject({ id, status: 'active', organization: demo });
  });

  it('refuses a re-consent by another organization: nothing stored, the connection keeps sending with its account', async () => {
    await createTenant(t, 'acme');
    const id = await connectTenant(t, 'acme');
    const grantBefore = await sql(`SELECT * FROM grants WHERE connection_id = $1`, [id]);
    const logsBefore = t.logs.length;

    const { done, session } = await connectAs('acme', 'acc_other');
    expect(done.status).toBe(302);
    expect(done.headers.location).toBe(`${RETURN_URL}?status=error&error=account_mismatch`);

    // The live connection is untouched: same row, status, organization and grant; no second connection.
    expect(await connection('acme')).toMatchObject({ id, status: 'active', organization: demo });
    expect(await sql(`SELECT id, status FROM connections WHERE tenant_id = 'acme'`)).toEqual([
      { id, status: 'active' },
    ]);
    expect(await sql(`SELECT * FROM grants WHERE connection_id = $1`, [id])).toEqual(grantBefore);
    // The link is not used up (the admin may approve again with the right account); its outcome says why.
    expect(
      await sql(`SELECT outcome, consumed_at FROM connect_sessions WHERE id = $1`, [session.id]),
    ).toEqual([{ outcome: 'account_mismatch', consumed_at: null }]);

    // One alert, one audit record, one event on the connection.
    const alerts = await alertsOf('acme');
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({
      connection_id: id,
      kind: 'connection.account_mismatch',
      payload: {
        event: 'connection.account_mismatch',
        connection_id: id,
        tenant_id: 'acme',
        environment: 'sandbox',
        status: 'active',
        last_error: 'account_mismatch',
        organization: demo,
        refused_organization: other,
      },
    });
    const audit = await request(t.baseUrl)
      .get('/v1/tenants/acme/audit-events?action=connection.reconsent_refused')
      .set(op)
      .expect(200);
    expect(audit.body.events).toHaveLength(1);
    expect(audit.body.events[0]).toMatchObject({
      tenant_id: 'acme',
      action: 'connection.reconsent_refused',
      actor: { type: 'connect_link', id: session.id, via: 'connect' },
      target: { type: 'connection', id },
      details: { reason: 'account_mismatch', organization_id: demo.id, refused_organization_id: other.id },
    });
    const events = await sql(`SELECT type FROM connection_events WHERE connection_id = $1 ORDER BY id`, [id]);
    expect(events.map((e) => e.type)).toEqual(['connected', 'reconsent_refused']);
    // The refused grant's tokens were never written anywhere we can see.
    const logs = t.logs.slice(logsBefore).join('\n');
    expect(logs).toContain('connection.account_mismatch');
    expect(logs).not.toMatch(/sbx_(at|rt|code)_/);

    // It still sends, with its original grant: the order lands in the original organization.
    const sent = await send(t, 'acme', 'after-refusal', {
      funding_source_id: 'FSDEMOMAIN',
      rewards: [reward()],
    }).expect(201);
    const orderId = sent.body.rewards[0].upstream_order_id as string;
    expect((await ordersOf('acc_demo')).map((o) => o.id)).toContain(orderId);
    expect(await ordersOf('acc_other')).toEqual([]);
  });

  it('shows its own page naming the connected organization when the session has no return_url', async () => {
    await createTenant(t, 'pageonly');
    await connectTenant(t, 'pageonly');
    const { done } = await connectAs('pageonly', 'acc_other', {});
    expect(done.status).toBe(409);
    expect(done.text).toContain('data-reason="account_mismatch"');
    expect(done.text).toContain('You approved a different rewards account');
    expect(done.text).toContain(`<strong>${demo.name}</strong>`);
  });

  it('refuses another organization for a connection that needs a new consent, and accepts its own (recovered)', async () => {
    await createTenant(t, 'broken');
    const id = await connectTenant(t, 'broken');
    await breakConnection('broken', id);

    const refused = await connectAs('broken', 'acc_other');
    expect(refused.done.headers.location).toBe(`${RETURN_URL}?status=error&error=account_mismatch`);
    expect(await connection('broken')).toMatchObject({ id, status: 'needs_reauth', organization: demo });
    const alert = await alertsOf('broken');
    expect(alert.map((a) => [a.kind, a.payload.status])).toEqual([
      ['connection.account_mismatch', 'needs_reauth'],
    ]);

    // The same organization: the ordinary re-consent — a new connection replaces the broken one, audited as such.
    const accepted = await connectAs('broken', 'acc_demo');
    expect(accepted.done.headers.location).toBe(`${RETURN_URL}?status=connected`);
    const now = await connection('broken');
    expect(now).toMatchObject({ status: 'active', organization: demo });
    expect(now.id).not.toBe(id);
    const actions = await request(t.baseUrl).get('/v1/tenants/broken/audit-events').set(op).expect(200);
    expect(actions.body.events.map((e: { action: string }) => e.action).slice(0, 3)).toEqual([
      'connection.reconsented',
      'connect_session.created',
      'connection.reconsent_refused',
    ]);
  });

  it('lets any organization connect once the tenant disconnected', async () => {
    await createTenant(t, 'switcher');
    const first = await connectTenant(t, 'switcher');
    await request(t.baseUrl).delete('/v1/tenants/switcher/connection').set(op).expect(200);
    const { done } = await connectAs('switcher', 'acc_other');
    expect(done.headers.location).toBe(`${RETURN_URL}?status=connected`);
    const now = await connection('switcher');
    expect(now).toMatchObject({ status: 'active', organization: other });
    expect(now.id).not.toBe(first);
    expect(await alertsOf('switcher')).toEqual([]);
    // It sends with the new account.
    const sent = await send(t, 'switcher', 'new-account', {
      funding_source_id: 'FSOTHERMAIN',
      rewards: [reward({ products: ['PRODCHOICE'], custom_fields: { Team: 'Red' } })],
    }).expect(201);
    expect((await ordersOf('acc_other')).map((o) => o.id)).toContain(sent.body.rewards[0].upstream_order_id);
  });

  it('refuses for now, with a retryable page, when the service does not say which organization was approved', async () => {
    await createTenant(t, 'unsure');
    const id = await connectTenant(t, 'unsure');
    await control(t, '/faults', { route: 'organizations', status: 503, times: 1 });
    const started = await startConnect(t, 'unsure', {});
    const callback = await approve(t, started.upstream, 'approve', 'acc_demo');
    const done = await request(t.baseUrl).get(callback).set('Cookie', started.cookie).expect(503);
    expect(done.text).toContain('data-reason="account_check_failed"');
    expect(done.text).toContain('Start again in a moment');
    expect(await connection('unsure')).toMatchObject({ id, status: 'active' });
    expect(await alertsOf('unsure')).toEqual([]);

    // The same link works once the service answers again.
    const authorize = await request(t.baseUrl).get(`${started.connectPath}/authorize`).expect(302);
    const cookie = (authorize.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
    const again = await approve(t, new URL(authorize.headers.location), 'approve', 'acc_demo');
    const ok = await request(t.baseUrl).get(again).set('Cookie', cookie).expect(200);
    expect(ok.text).toContain('Rewards account connected');
    expect((await connection('unsure')).id).not.toBe(id);
  });

  it('connects a first time even when the organization is not told, and learns it at the next probe', async () => {
    await createTenant(t, 'later');
    await control(t, '/faults', { route: 'organizations', status: 503, times: 1 });
    const id = await connectTenant(t, 'later');
    expect(await connection('later')).toMatchObject({ id, status: 'active', organization: null });
    const checked = await request(t.baseUrl).post(`/v1/ops/connections/${id}/check`).set(op).expect(201);
    expect(checked.body.organization).toEqual(demo);
    expect((await connection('later')).organization).toEqual(demo);
  });

  it('asks a connection made before organizations were recorded for its own before comparing', async () => {
    await createTenant(t, 'legacy');
    const id = await connectTenant(t, 'legacy');
    await sql(`UPDATE connections SET organization_id = NULL, organization_name = NULL WHERE id = $1`, [id]);
    const { done } = await connectAs('legacy', 'acc_other');
    expect(done.headers.location).toBe(`${RETURN_URL}?status=error&error=account_mismatch`);
    expect(await connection('legacy')).toMatchObject({ id, status: 'active', organization: demo });

    // One that needs a new consent cannot be asked (its grant is dead): the new consent is accepted.
    await sql(`UPDATE connections SET organization_id = NULL, organization_name = NULL WHERE id = $1`, [id]);
    await breakConnection('legacy', id);
    const accepted = await connectAs('legacy', 'acc_other');
    expect(accepted.done.headers.location).toBe(`${RETURN_URL}?status=connected`);
    expect((await connection('legacy')).organization).toEqual(other);
  });

  it('decides two concurrent re-consents one after the other: the same organization wins, the other is refused', async () => {
    await createTenant(t, 'racy');
    const id = await connectTenant(t, 'racy');
    for (let round = 0; round < 3; round++) {
      const [same, foreign] = await Promise.all([startConnect(t, 'racy'), startConnect(t, 'racy')]);
      const [sameCallback, foreignCallback] = await Promise.all([
        approve(t, same.upstream, 'approve', 'acc_demo'),
        approve(t, foreign.upstream, 'approve', 'acc_other'),
      ]);
      const [a, b] = await Promise.all([
        request(t.baseUrl).get(sameCallback).set('Cookie', same.cookie),
        request(t.baseUrl).get(foreignCallback).set('Cookie', foreign.cookie),
      ]);
      expect(a.headers.location).toBe(`${RETURN_URL}?status=connected`);
      expect(b.headers.location).toBe(`${RETURN_URL}?status=error&error=account_mismatch`);
    }
    const rows = await sql(
      `SELECT status, organization_id FROM connections WHERE tenant_id = 'racy' AND status <> 'disconnected'`,
    );
    expect(rows).toEqual([{ status: 'active', organization_id: demo.id }]);
    expect((await connection('racy')).id).not.toBe(id);
    expect((await alertsOf('racy')).map((a) => a.kind)).toEqual(Array(3).fill('connection.account_mismatch'));
  });
});
