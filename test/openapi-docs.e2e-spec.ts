import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { COMMON_ERROR_CODES } from '../src/common/app-error';
import { CONNECTION_ERROR_CODES } from '../src/connections/connections.errors';
import { DELIVERY_WEBHOOK_ERROR_CODES } from '../src/delivery-webhooks/delivery-webhooks.errors';
import { FIELDS_ERROR_CODES } from '../src/fields-cache/fields-cache.errors';
import { OPS_ERROR_CODES } from '../src/ops/ops.errors';
import { SEND_REWARDS_BODY_SCHEMA } from '../src/reward-dispatch/dto/send-rewards.dto';
import { DISPATCH_ERROR_CODES } from '../src/reward-dispatch/reward-dispatch.errors';
import { UPSTREAM_ERROR_CODES } from '../src/rewards-api/rewards-api.errors';
import { TENANT_WEBHOOK_ERROR_CODES } from '../src/tenant-webhooks/tenant-webhooks.errors';
import { TENANT_ERROR_CODES } from '../src/tenants/tenants.errors';
import { TOKEN_VAULT_ERROR_CODES } from '../src/token-vault/token-vault.errors';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, op } from './support/connect';

/** Every code a module declares. */
const CODES = new Set<string>([
  ...COMMON_ERROR_CODES,
  ...TENANT_ERROR_CODES,
  ...CONNECTION_ERROR_CODES,
  ...TOKEN_VAULT_ERROR_CODES,
  ...UPSTREAM_ERROR_CODES,
  ...FIELDS_ERROR_CODES,
  ...DISPATCH_ERROR_CODES,
  ...OPS_ERROR_CODES,
  ...TENANT_WEBHOOK_ERROR_CODES,
  ...DELIVERY_WEBHOOK_ERROR_CODES,
]);

const ERROR_REF = '#/components/schemas/ErrorResponse';
/** Public routes without a 4xx answer: nothing a caller sends can be wrong (readiness documents its 503). */
const NO_4XX = new Set(['GET /health/live', 'GET /health/ready', 'GET /metrics']);
/** Public routes: no API key, so no security requirement in the document. */
const PUBLIC = new Set([
  'GET /health/live',
  'GET /health/ready',
  'GET /metrics',
  'POST /webhooks/rewards/{environment}',
]);
/** Bodies that cannot be pasted as they are: the rewards service signs each webhook with the account's key. */
const NOT_SENDABLE = new Set(['POST /webhooks/rewards/{environment}']);

interface Example {
  summary?: string;
  value: unknown;
}
interface Media {
  schema?: { $ref?: string };
  examples?: Record<string, Example>;
}
interface Operation {
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; example?: unknown }[];
  requestBody?: { content: Record<string, Media> };
  responses: Record<string, { content?: Record<string, Media> }>;
}
type Doc = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
};

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

function operations(doc: Doc): { key: string; method: string; path: string; op: Operation }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]) => ({
        key: `${method.toUpperCase()} ${path}`,
        method,
        path,
        op: operation,
      })),
  );
}

describe('OpenAPI: every error answer with the error schema and an example; request examples that work', () => {
  let t: TestApp;
  let doc: Doc;

  beforeAll(async () => {
    // A short webhook timeout: the endpoint example points at platform.example.com, which this machine cannot reach.
    t = await startTestApp({ WEBHOOK_TIMEOUT_MS: '1000' });
    doc = (await request(t.baseUrl).get('/docs/openapi.json').expect(200)).body as Doc;
  });
  afterAll(async () => {
    await t.close();
  });

  it('defines one ErrorResponse schema: {error: {code, message, details: [{field, reason}]}}', () => {
    const schemas = doc.components.schemas as Record<string, { properties: Record<string, unknown> }>;
    expect(schemas.ErrorResponse.properties.error).toEqual({ $ref: '#/components/schemas/ErrorBody' });
    expect(Object.keys(schemas.ErrorBody.properties)).toEqual(
      expect.arrayContaining(['code', 'message', 'details']),
    );
    expect(Object.keys(schemas.ErrorDetail.properties)).toEqual(expect.arrayContaining(['field', 'reason']));
  });

  it('documents at least one 4xx with the error schema on every route that has an error path', () => {
    const missing = operations(doc)
      .filter(({ key }) => !NO_4XX.has(key))
      .filter(
        ({ op }) =>
          !Object.entries(op.responses).some(
            ([status, r]) =>
              /^4\d\d$/.test(status) && r.content?.['application/json']?.schema?.$ref === ERROR_REF,
          ),
      )
      .map(({ key }) => key);
    expect(missing).toEqual([]);
    expect(operations(doc).length).toBeGreaterThan(25);
  });

  it('gives every documented error answer the error schema and examples with declared codes', () => {
    const problems: string[] = [];
    for (const { key, op } of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses)) {
        if (!/^[45]\d\d$/.test(status)) continue;
        const media = response.content?.['application/json'];
        if (media?.schema?.$ref !== ERROR_REF) {
          problems.push(`${key} ${status}: not the ErrorResponse schema`);
          continue;
        }
        const examples = Object.values(media.examples ?? {});
        if (examples.length === 0) problems.push(`${key} ${status}: no example`);
        for (const example of examples) {
          const error = (example.value as { error?: Record<string, unknown> }).error;
          if (
            !error ||
            typeof error.code !== 'string' ||
            typeof error.message !== 'string' ||
            !Array.isArray(error.details) ||
            !(error.details as { reason?: unknown }[]).every((d) => typeof d.reason === 'string')
          ) {
            problems.push(`${key} ${status}: an example is not {error: {code, message, details}}`);
            continue;
          }
          if (!CODES.has(error.code)) problems.push(`${key} ${status}: ${error.code} is no declared code`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('documents the key errors on every keyed route, tenant_not_found under a tenant, body errors with a body', () => {
    const codesOf = (op: Operation, status: string) =>
      Object.values(op.responses[status]?.content?.['application/json']?.examples ?? {}).map(
        (e) => (e.value as { error: { code: string } }).error.code,
      );
    const problems: string[] = [];
    for (const { key, path, op } of operations(doc)) {
      if (!path.startsWith('/v1/')) continue;
      if (!codesOf(op, '401').includes('missing_api_key') || !codesOf(op, '401').includes('invalid_api_key'))
        problems.push(`${key}: 401 missing_api_key / invalid_api_key`);
      if (!codesOf(op, '429').includes('too_many_failed_authentications'))
        problems.push(`${key}: 429 too_many_failed_authentications`);
      if (path.startsWith('/v1/tenants/{tenant}') && !codesOf(op, '404').includes('tenant_not_found'))
        problems.push(`${key}: 404 tenant_not_found`);
      if (op.requestBody) {
        if (!codesOf(op, '400').includes('invalid_json')) problems.push(`${key}: 400 invalid_json`);
        if (!codesOf(op, '413').includes('payload_too_large')) problems.push(`${key}: 413`);
        if (!codesOf(op, '415').includes('unsupported_media_type')) problems.push(`${key}: 415`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('marks the public routes as needing no key, and every other route as needing a bearer key', () => {
    for (const { key, path, op } of operations(doc)) {
      if (PUBLIC.has(key)) {
        expect({ key, security: op.security ?? [] }).toEqual({ key, security: [] });
        if (path !== '/webhooks/rewards/{environment}') expect(op.description).toMatch(/Public: no API key/);
      } else {
        expect({ key, security: op.security }).toEqual({ key, security: [{ bearer: [] }] });
      }
    }
    expect(PUBLIC.size).toBe(operations(doc).filter(({ key }) => PUBLIC.has(key)).length);
  });

  it('shows the send body as the schema the route validates it with: its fields, limits and examples', () => {
    const media = doc.paths['/v1/tenants/{tenant}/rewards'].post.requestBody?.content['application/json'];
    expect(media?.schema).toEqual(JSON.parse(JSON.stringify(SEND_REWARDS_BODY_SCHEMA)));
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const body = media?.schema as any;
    expect(Object.keys(body.properties)).toEqual([
      'environment',
      'funding_source_id',
      'external_reference',
      'rewards',
    ]);
    expect(body).toMatchObject({ additionalProperties: false, required: ['rewards'] });
    expect(body.properties.rewards).toMatchObject({ type: 'array', minItems: 1, maxItems: 10_000 });
    const reward = body.properties.rewards.items;
    expect(reward).toMatchObject({ additionalProperties: false, required: ['recipient', 'value'] });
    expect(Object.keys(reward.properties)).toEqual([
      'recipient',
      'value',
      'products',
      'campaign_id',
      'delivery',
      'custom_fields',
    ]);
    expect(reward.properties.recipient.properties.name).toMatchObject({
      minLength: 1,
      maxLength: 255,
      example: 'Ada Lovelace',
    });
    expect(reward.properties.recipient.properties.email).toMatchObject({ format: 'email', nullable: true });
    expect(reward.properties.value.properties.denomination).toMatchObject({
      minimum: 0.01,
      maximum: 1_000_000,
      multipleOf: 0.01,
      example: 25,
    });
    expect(reward.properties.products).toMatchObject({
      minItems: 1,
      maxItems: 10,
      example: ['PRODAMAZONUS'],
    });
    expect(reward.properties.delivery.properties.method.enum).toEqual(['EMAIL', 'LINK', 'PHONE']);
    expect(reward.properties.custom_fields.anyOf).toHaveLength(2);
    expect(Object.keys(media?.examples ?? {})).toEqual(['email', 'campaignLink']);
  });

  it('gives every JSON request body at least one example', () => {
    const without = operations(doc)
      .filter(({ op }) => op.requestBody)
      .filter(
        ({ op }) => Object.keys(op.requestBody?.content['application/json']?.examples ?? {}).length === 0,
      )
      .map(({ key }) => key);
    expect(without).toEqual([]);
  });

  it('every request body example works as it is: 2xx from the gateway (demo sandbox, a connected tenant)', async () => {
    const bodies = operations(doc)
      .filter(({ op }) => op.requestBody)
      .flatMap(({ key, method, path, op }) =>
        Object.entries(op.requestBody?.content['application/json']?.examples ?? {}).map(
          ([name, example]) => ({
            key,
            name,
            method,
            path,
            op,
            value: example.value,
          }),
        ),
      )
      .filter(({ key }) => !NOT_SENDABLE.has(key));
    const run = async (b: (typeof bodies)[number]) => {
      let url = b.path.replace('{tenant}', 'acme');
      // A key to rotate: a fresh one for each example (a key is rotated once).
      if (url.includes('{keyId}')) {
        const key = await request(t.baseUrl)
          .post('/v1/tenants/acme/api-keys')
          .set(op)
          .send({ name: 'to-rotate' });
        url = url.replace('{keyId}', key.body.id as string);
      }
      expect({ example: `${b.key} ${b.name}`, unfilled: /[{}]/.test(url) }).toMatchObject({
        unfilled: false,
      });
      const req = request(t.baseUrl)[b.method as 'post' | 'patch'](url).set(op);
      if (b.op.parameters?.some((p) => p.in === 'header' && p.name === 'Idempotency-Key'))
        req.set('Idempotency-Key', `openapi-example-${randomUUID()}`);
      const res = await req.send(b.value as object);
      const ok = res.status >= 200 && res.status < 300;
      // The example's name and the answer in the failure message: which example broke, and why.
      expect({ example: `${b.key} ${b.name}`, ok, answer: ok ? null : [res.status, res.body] }).toEqual({
        example: `${b.key} ${b.name}`,
        ok: true,
        answer: null,
      });
      return res;
    };

    // The tenant first (the others are under it), then its connection through the consent page, then the rest.
    const tenantCreate = bodies.filter((b) => b.key === 'POST /v1/tenants');
    expect(tenantCreate.length).toBeGreaterThan(0);
    for (const b of tenantCreate) await run(b);
    await connectTenant(t, 'acme');
    const rest = bodies.filter((b) => b.key !== 'POST /v1/tenants');
    for (const b of rest) await run(b);

    const tried = new Set(bodies.map((b) => b.key));
    for (const key of [
      'POST /v1/tenants',
      'PATCH /v1/tenants/{tenant}',
      'POST /v1/tenants/{tenant}/api-keys',
      'POST /v1/tenants/{tenant}/api-keys/{keyId}/rotate',
      'POST /v1/tenants/{tenant}/connect-sessions',
      'POST /v1/tenants/{tenant}/rewards',
      'POST /v1/tenants/{tenant}/webhooks',
    ])
      expect(tried).toContain(key);
    const sent = await request(t.baseUrl).get('/v1/tenants/acme/dispatches').set(op).expect(200);
    const statuses = (sent.body.dispatches as { status: string }[]).map((d) => d.status);
    expect(statuses.length).toBe(bodies.filter((b) => b.key === 'POST /v1/tenants/{tenant}/rewards').length);
    expect(statuses.every((s) => s === 'sent')).toBe(true);
  });
});
