import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { RequestMethod } from '@nestjs/common';
import { MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import request from 'supertest';
import { API_KEY_SCOPES, OPERATOR_ONLY, PUBLIC_ROUTE, REQUIRED_SCOPES } from '../src/tenants/auth/principal';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward, waitFor } from './support/send';

interface Route {
  route: string;
  access: 'public' | 'operator' | 'scoped' | 'undeclared';
  scopes: string[];
}

/** Every route of the app as Nest's router has it: `METHOD /path/{param}` with its access rule. */
function routesOf(t: TestApp): Route[] {
  const reflector = t.app.get(Reflector);
  const scanner = new MetadataScanner();
  const routes: Route[] = [];
  for (const module of t.app.get(ModulesContainer).values()) {
    for (const wrapper of module.controllers.values()) {
      const controller = wrapper.metatype as () => unknown;
      const proto = Object.getPrototypeOf(wrapper.instance) as Record<string, () => unknown>;
      const prefix = (Reflect.getMetadata(PATH_METADATA, controller) as string | undefined) ?? '';
      for (const name of scanner.getAllMethodNames(proto)) {
        const handler = proto[name];
        const subPath = Reflect.getMetadata(PATH_METADATA, handler) as string | undefined;
        if (subPath === undefined) continue;
        const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number];
        const full = `/${[prefix, subPath].filter((p) => p && p !== '/').join('/')}`
          .replace(/\/+/g, '/')
          .replace(/:(\w+)/g, '{$1}');
        const targets = [handler, controller];
        const scopes = reflector.getAllAndOverride<string[] | undefined>(REQUIRED_SCOPES, targets) ?? [];
        const access = reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)
          ? 'public'
          : reflector.getAllAndOverride<boolean>(OPERATOR_ONLY, targets)
            ? 'operator'
            : scopes.length
              ? 'scoped'
              : 'undeclared';
        routes.push({ route: `${method} ${full}`, access, scopes });
      }
    }
  }
  return routes;
}

/** The scope table of docs/api.md: `| \`METHOD /path\` | \`scope\` · \`scope\` |` rows. */
function documentedScopes(): Map<string, string[]> {
  const api = readFileSync(path.join(__dirname, '..', 'docs', 'api.md'), 'utf8');
  const start = api.indexOf('\n### Scopes\n');
  const section = api.slice(start, api.indexOf('\n#', start + 5));
  const table = new Map<string, string[]>();
  for (const [, route, scopes] of section.matchAll(/^\| `([A-Z]+ \/[^`]+)` \| ([^|]+) \|/gm))
    table.set(route, [...scopes.matchAll(/`([a-z:]+)`/g)].map((m) => m[1]).sort());
  return table;
}

describe('scoped API keys', () => {
  let t: TestApp;
  const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

  async function createKey(name: string, scopes?: string[]): Promise<{ id: string; key: string }> {
    const res = await request(t.baseUrl)
      .post('/v1/tenants/scoped/api-keys')
      .set(op)
      .send(scopes ? { name, scopes } : { name })
      .expect(201);
    return res.body as { id: string; key: string };
  }

  beforeAll(async () => {
    t = await startTestApp({ OPS_PROBE_INTERVAL_MS: '0' });
    await control(t, '/reset');
    await createTenant(t, 'scoped');
    await connectTenant(t, 'scoped');
  });
  afterAll(async () => {
    await t.close();
  });

  it('every route of the app is public, operator-only, or declares its scopes — and docs/api.md lists exactly those', () => {
    const routes = routesOf(t);
    expect(routes.length).toBeGreaterThan(30);
    expect(routes.filter((r) => r.access === 'undeclared').map((r) => r.route)).toEqual([]);
    for (const r of routes) for (const scope of r.scopes) expect(API_KEY_SCOPES).toContain(scope);
    // A tenant key reaches every /v1/tenants/{tenant} route but the operator's; nothing else.
    const scoped = routes.filter((r) => r.access === 'scoped');
    expect(scoped.every((r) => / \/v1\/tenants\/\{tenant\}/.test(r.route))).toBe(true);
    const documented = documentedScopes();
    expect(Object.fromEntries(documented)).toEqual(
      Object.fromEntries(scoped.map((r) => [r.route, [...r.scopes].sort()])),
    );
    // The send route and its follow-ups, as decided.
    expect(documented.get('POST /v1/tenants/{tenant}/rewards')).toEqual(['rewards:send']);
    expect(documented.get('GET /v1/tenants/{tenant}/audit-events')).toEqual(['connection:manage']);
  });

  it('gives a new key every scope unless told, and lists scopes, last use and expiry — never the key or its hash', async () => {
    const all = await createKey('all');
    expect(all).toMatchObject({ scopes: [...API_KEY_SCOPES], expires_at: null, rotated_from: null });
    const narrow = await createKey('reader', ['rewards:read', 'rewards:read']);
    expect(narrow).toMatchObject({ scopes: ['rewards:read'], last_used_at: null });
    await request(t.baseUrl).get('/v1/tenants/scoped/dispatches').set(bearer(narrow.key)).expect(200);
    // Last use is written off the request path, once a minute per key and process at most.
    const listed = await waitFor(
      async () =>
        (await request(t.baseUrl).get('/v1/tenants/scoped/api-keys').set(op).expect(200)).body as Record<
          string,
          unknown
        >[],
      (keys) => keys.some((k) => k.id === narrow.id && k.last_used_at !== null),
    );
    const row = listed.find((k) => k.id === narrow.id) as Record<string, unknown>;
    expect(Object.keys(row).sort()).toEqual(
      [
        'created_at',
        'expires_at',
        'id',
        'last_used_at',
        'name',
        'prefix',
        'revoked_at',
        'rotated_from',
        'scopes',
      ].sort(),
    );
    expect(JSON.stringify(listed)).not.toContain(narrow.key);
    expect(JSON.stringify(listed)).not.toContain(all.key);
  });

  it('refuses an unknown scope, naming it, and an empty list', async () => {
    const unknown = await request(t.baseUrl)
      .post('/v1/tenants/scoped/api-keys')
      .set(op)
      .send({ name: 'bad', scopes: ['rewards:send', 'rewards:write', 7] })
      .expect(400);
    expect(unknown.body.error).toMatchObject({ code: 'validation_failed' });
    expect(unknown.body.error.details).toEqual([
      {
        field: 'scopes',
        reason:
          'unknown scope "rewards:write", 7; the scopes are rewards:send, rewards:read, connection:manage, webhooks:manage',
      },
    ]);
    const empty = await request(t.baseUrl)
      .post('/v1/tenants/scoped/api-keys')
      .set(op)
      .send({ name: 'bad', scopes: [] })
      .expect(400);
    expect(empty.body.error.details).toEqual([
      { field: 'scopes', reason: 'scopes must list at least one scope (leave it out for every scope)' },
    ]);
    const notList = await request(t.baseUrl)
      .post('/v1/tenants/scoped/api-keys')
      .set(op)
      .send({ name: 'bad', scopes: 'rewards:send' })
      .expect(400);
    expect(notList.body.error.details[0].field).toBe('scopes');
  });

  it('a key without rewards:send gets 403 insufficient_scope on the send route and on batches, and nothing is stored', async () => {
    const reader = await createKey('read-only', ['rewards:read']);
    const one = await request(t.baseUrl)
      .post('/v1/tenants/scoped/rewards')
      .set(bearer(reader.key))
      .set('Idempotency-Key', 'scope-one')
      .send({ rewards: [reward()] })
      .expect(403);
    expect(one.body.error).toEqual({
      code: 'insufficient_scope',
      message: 'This API key lacks the rewards:send scope this operation needs.',
      details: [
        {
          field: 'scopes',
          reason: 'This API key lacks the rewards:send scope this operation needs.',
          required_scopes: ['rewards:send'],
          key_scopes: ['rewards:read'],
        },
      ],
    });
    // A batch: more rewards than are sent inline (DISPATCH_INLINE_MAX_REWARDS, 10).
    const batch = await request(t.baseUrl)
      .post('/v1/tenants/scoped/rewards')
      .set(bearer(reader.key))
      .set('Idempotency-Key', 'scope-batch')
      .send({ rewards: Array.from({ length: 25 }, () => reward()) })
      .expect(403);
    expect(batch.body.error.code).toBe('insufficient_scope');
    expect(batch.body.error.details[0].required_scopes).toEqual(['rewards:send']);
    const dispatches = await request(t.baseUrl).get('/v1/tenants/scoped/dispatches').set(op).expect(200);
    expect(dispatches.body.dispatches).toEqual([]);

    // The same send with rewards:send goes through; the reader may then read what was sent.
    const sender = await createKey('sender', ['rewards:send']);
    const sent = await request(t.baseUrl)
      .post('/v1/tenants/scoped/rewards')
      .set(bearer(sender.key))
      .set('Idempotency-Key', 'scope-sent')
      .send({ funding_source_id: 'FSDEMOMAIN', rewards: [reward()] })
      .expect(201);
    // A send-only key follows up on its own dispatch (poll, rewards, cancel), but lists nothing.
    await request(t.baseUrl)
      .get(`/v1/tenants/scoped/dispatches/${sent.body.id as string}`)
      .set(bearer(sender.key))
      .expect(200);
    await request(t.baseUrl)
      .get(`/v1/tenants/scoped/dispatches/${sent.body.id as string}/rewards`)
      .set(bearer(sender.key))
      .expect(200);
    const list = await request(t.baseUrl)
      .get('/v1/tenants/scoped/dispatches')
      .set(bearer(sender.key))
      .expect(403);
    expect(list.body.error.details[0].required_scopes).toEqual(['rewards:read']);
    await request(t.baseUrl)
      .get(`/v1/tenants/scoped/dispatches/${sent.body.id as string}`)
      .set(bearer(reader.key))
      .expect(200);
    // A key may read its tenant whatever its scopes.
    await request(t.baseUrl).get('/v1/tenants/scoped').set(bearer(sender.key)).expect(200);
  });

  it('keeps each scope to its routes: connection, webhooks, keys and the audit trail', async () => {
    const sender = await createKey('sender-2', ['rewards:send', 'rewards:read']);
    const refused = async (method: 'get' | 'post' | 'delete', url: string, scope: string) => {
      const res = await request(t.baseUrl)[method](url).set(bearer(sender.key)).send({});
      expect({
        url,
        status: res.status,
        code: res.body.error?.code,
        scopes: res.body.error?.details?.[0]?.required_scopes,
      }).toEqual({
        url,
        status: 403,
        code: 'insufficient_scope',
        scopes: [scope],
      });
    };
    await refused('get', '/v1/tenants/scoped/connection', 'connection:manage');
    await refused('delete', '/v1/tenants/scoped/connection', 'connection:manage');
    await refused('post', '/v1/tenants/scoped/connect-sessions', 'connection:manage');
    await refused('get', '/v1/tenants/scoped/api-keys', 'connection:manage');
    await refused('get', '/v1/tenants/scoped/audit-events', 'connection:manage');
    await refused('get', '/v1/tenants/scoped/webhooks', 'webhooks:manage');
    await refused('post', '/v1/tenants/scoped/webhooks', 'webhooks:manage');
    // The connection is still there: the refused DELETE changed nothing.
    await request(t.baseUrl).get('/v1/tenants/scoped/connection').set(op).expect(200);

    const admin = await createKey('settings', ['connection:manage', 'webhooks:manage']);
    await request(t.baseUrl).get('/v1/tenants/scoped/connection').set(bearer(admin.key)).expect(200);
    await request(t.baseUrl).get('/v1/tenants/scoped/webhooks').set(bearer(admin.key)).expect(200);
    await request(t.baseUrl).get('/v1/tenants/scoped/audit-events').set(bearer(admin.key)).expect(200);
    const keys = await request(t.baseUrl)
      .get('/v1/tenants/scoped/api-keys')
      .set(bearer(admin.key))
      .expect(200);
    expect((keys.body as unknown[]).length).toBeGreaterThan(3);
    const send = await request(t.baseUrl)
      .post('/v1/tenants/scoped/rewards')
      .set(bearer(admin.key))
      .set('Idempotency-Key', 'admin-send')
      .send({ rewards: [reward()] })
      .expect(403);
    expect(send.body.error.details[0].required_scopes).toEqual(['rewards:send']);
    // Operator routes stay the operator's, whatever the scopes.
    const create = await request(t.baseUrl)
      .post('/v1/tenants/scoped/api-keys')
      .set(bearer(admin.key))
      .send({ name: 'mine' })
      .expect(403);
    expect(create.body.error.code).toBe('operator_key_required');
  });

  it('answers another tenant’s path 404 whatever the scopes (a scope error reveals nothing)', async () => {
    await createTenant(t, 'other-scoped');
    const reader = await createKey('reader-2', ['rewards:read']);
    const res = await request(t.baseUrl)
      .post('/v1/tenants/other-scoped/rewards')
      .set(bearer(reader.key))
      .set('Idempotency-Key', 'x')
      .send({ rewards: [reward()] })
      .expect(404);
    expect(res.body.error.code).toBe('tenant_not_found');
  });

  it('documents each scoped route’s scopes and its 403 in the OpenAPI document', async () => {
    const doc = (await request(t.baseUrl).get('/docs/openapi.json').expect(200)).body as {
      paths: Record<
        string,
        Record<string, { 'x-required-scopes'?: string[]; responses: Record<string, unknown> }>
      >;
    };
    const send = doc.paths['/v1/tenants/{tenant}/rewards'].post;
    expect(send['x-required-scopes']).toEqual(['rewards:send']);
    expect(JSON.stringify(send.responses['403'])).toContain('insufficient_scope');
    expect(doc.paths['/v1/tenants'].post['x-required-scopes']).toBeUndefined();
  });
});
