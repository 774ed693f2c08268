import 'reflect-metadata';
import { getMetadataStorage } from 'class-validator';
import fc from 'fast-check';
import type { ErrorDetail } from '../../common/app-error';
import { ValidationFailedError } from '../../common/app-error';
import { createValidationPipe } from '../../common/validation';
import { customFieldsShapeProblem } from '../../fields-cache/custom-fields';
import { DELIVERY_METHODS } from '../../rewards-api/rewards-api.types';
import { SendRewardsDto } from './send-rewards.dto';
import { MAX_SEND_BODY_DETAILS, validateSendBody } from './send-rewards.schema';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Body = { [key: string]: Json };

/** The `@ArrayMaxSize()` rule of `SendRewardsDto.rewards` as class-validator holds it. */
const pipeLimitRule = getMetadataStorage()
  .getTargetValidationMetadatas(SendRewardsDto, '', false, false)
  .find((m) => m.propertyName === 'rewards' && m.name === 'arrayMaxSize');

/** The limit the pipe applies (100, then 10,000 for batches). */
const PIPE_MAX_REWARDS = Number(pipeLimitRule?.constraints[0]);

/**
 * The property test lowers the pipe's limit to cross it cheaply (a body of 10,000 rewards is slow to check), by
 * changing the constraint of that one rule: a subclass with its own `@ArrayMaxSize()` would lose the
 * inherited rules of the same kind (`@IsArray()`…) in class-validator.
 */
const SMALL_MAX_REWARDS = 6;

const pipe = createValidationPipe();

/** What the global ValidationPipe answers: its details, or the exception it threw instead of a validation error. */
async function pipeOutcome(body: unknown): Promise<{ details: ErrorDetail[] } | { thrown: unknown }> {
  try {
    await pipe.transform(structuredClone(body), { type: 'body', metatype: SendRewardsDto, data: undefined });
    return { details: [] };
  } catch (error) {
    if (error instanceof ValidationFailedError) return { details: error.details };
    return { thrown: error };
  }
}

async function pipeFields(body: unknown): Promise<string[]> {
  const outcome = await pipeOutcome(body);
  if ('thrown' in outcome) throw outcome.thrown;
  return outcome.details.map((d) => d.field ?? '');
}

function ajvFields(body: unknown, maxRewards = PIPE_MAX_REWARDS): string[] {
  return validateSendBody(body, maxRewards).map((d) => d.field ?? '');
}

function isUnder(field: string, ancestor: string): boolean {
  return (
    field.length > ancestor.length && field.startsWith(ancestor) && '.['.includes(field[ancestor.length])
  );
}

/**
 * The failing fields that are not inside another failing field. The pipe also reports inside some values it refuses
 * as a whole (`recipient: [{…}]` gives `recipient` and `recipient[0].name`); the schema stops at the value refused.
 */
function topLevel(fields: string[]): string[] {
  const unique = [...new Set(fields)];
  return unique.filter((f) => !unique.some((other) => isUnder(f, other))).sort();
}

const reward = (): Body => ({
  recipient: { name: 'Ada Lovelace', email: 'ada@example.com' },
  value: { denomination: 25, currency_code: 'USD' },
  products: ['PRODAMAZONUS'],
});
const body = (...rewards: Body[]): Body => ({ rewards: rewards.length ? rewards : [reward()] });

/** A valid body with `change` applied to its first reward. */
function withReward(change: (r: Body & { recipient: Body; value: Body }) => void): Body {
  const r = reward() as Body & { recipient: Body; value: Body };
  change(r);
  return body(r);
}

/** Asserts the schema's fields, and that the pipe fails (or passes) on the same top-level fields. */
async function expectFields(input: unknown, fields: string[]): Promise<ErrorDetail[]> {
  const details = validateSendBody(input, PIPE_MAX_REWARDS);
  expect(details.map((d) => d.field).sort()).toEqual([...fields].sort());
  expect(topLevel(await pipeFields(input))).toEqual(topLevel(fields));
  for (const d of details) expect(d.reason).toContain(d.field);
  return details;
}

describe('validateSendBody (ajv) against SendRewardsDto under the ValidationPipe', () => {
  describe('valid bodies', () => {
    it('accepts a minimal body and one with every optional property', async () => {
      await expectFields(body(), []);
      await expectFields(
        {
          environment: 'production',
          funding_source_id: 'BALANCE',
          external_reference: 'payroll-2026-11',
          rewards: [
            {
              recipient: { name: 'Ada', email: 'ada@example.com', phone: '+44 20 7946 0958' },
              value: { denomination: 1_000_000, currency_code: 'EUR' },
              campaign_id: 'CAMPAIGNDEMO1',
              delivery: { method: 'PHONE' },
              custom_fields: { Department: 'Sales', Headcount: 3, Remote: true, Tags: ['a', 'b'] },
            },
            {
              recipient: { name: 'x'.repeat(255) },
              value: { denomination: 0.01, currency_code: 'GBP' },
              products: Array.from({ length: 10 }, () => 'p'.repeat(200)),
              delivery: { method: 'LINK' },
              custom_fields: [
                { id: 'FLDDEPARTMENT', value: 'Sales' },
                { label: 'Region', value: 'EMEA' },
              ],
            },
          ],
        },
        [],
      );
    });

    it('takes null for every optional property (@IsOptional)', async () => {
      await expectFields(
        {
          environment: null,
          funding_source_id: null,
          external_reference: null,
          rewards: [
            {
              recipient: { name: 'Ada', email: null, phone: null },
              value: { denomination: 0.29, currency_code: 'USD' },
              products: null,
              campaign_id: null,
              delivery: null,
              custom_fields: null,
            },
          ],
        },
        [],
      );
    });

    it('counts lengths as class-validator does (a variation selector after a character is not counted)', async () => {
      await expectFields(
        withReward((r) => (r.recipient.name = '\u2764\uFE0F'.repeat(255))),
        [],
      );
      await expectFields(
        withReward((r) => (r.recipient.name = '\u2764\uFE0F'.repeat(256))),
        ['rewards[0].recipient.name'],
      );
    });

    it('does not modify the body', () => {
      const input = { ...body(), extra: 1 };
      const copy = structuredClone(input);
      validateSendBody(input, PIPE_MAX_REWARDS);
      expect(input).toEqual(copy);
    });
  });

  describe('rewards', () => {
    it('is required, and an array', async () => {
      const [missing] = await expectFields({}, ['rewards']);
      expect(missing.reason).toMatch(/rewards is required/);
      await expectFields({ rewards: null }, ['rewards']);
      await expectFields({ rewards: 'x' }, ['rewards']);
      await expectFields({ rewards: { recipient: {} } }, ['rewards']);
    });

    it('takes a missing body for {}, as the pipe does', async () => {
      await expectFields(null, ['rewards']);
      await expectFields(undefined, ['rewards']);
    });

    it('holds at least one reward', async () => {
      const [detail] = await expectFields({ rewards: [] }, ['rewards']);
      expect(detail.reason).toBe(`rewards must be a list of 1–${PIPE_MAX_REWARDS} rewards`);
    });

    it('holds at most the given number of rewards, without looking at them beyond it', async () => {
      await expectFields(body(...Array.from({ length: PIPE_MAX_REWARDS }, reward)), []);
      const tooMany = body(...Array.from({ length: PIPE_MAX_REWARDS + 1 }, reward));
      const [detail] = await expectFields(tooMany, ['rewards']);
      expect(detail.reason).toBe(
        `rewards must contain at most ${PIPE_MAX_REWARDS} rewards (it has ${PIPE_MAX_REWARDS + 1})`,
      );

      const batch = body(...Array.from({ length: 10_000 }, reward));
      expect(validateSendBody(batch, 10_000)).toEqual([]);
      expect(validateSendBody(batch, 9_999)).toEqual([
        { field: 'rewards', reason: 'rewards must contain at most 9999 rewards (it has 10000)' },
      ]);
      expect(() => validateSendBody(batch, 0)).toThrow(RangeError);
    });

    it('holds objects: names the list and each item that is not one', async () => {
      const details = await expectFields({ rewards: [reward(), 'x', null, 5, [], [reward()]] }, [
        'rewards',
        'rewards[1]',
        'rewards[2]',
        'rewards[3]',
        'rewards[4]',
        'rewards[5]',
      ]);
      expect(details[0]).toEqual({
        field: 'rewards',
        reason: 'each item of rewards must be an object (a reward)',
      });
    });

    it('stops after MAX_SEND_BODY_DETAILS details', () => {
      const details = validateSendBody(body(...Array.from({ length: 1_000 }, () => ({}))), 10_000);
      expect(details).toHaveLength(MAX_SEND_BODY_DETAILS);
      expect(details[0].field).toBe('rewards[0].recipient');
      expect(details.at(-1)?.field).toBe('rewards[49].value');
    });
  });

  describe('a reward', () => {
    it('needs a recipient with a name', async () => {
      await expectFields(
        withReward((r) => delete (r as Body).recipient),
        ['rewards[0].recipient'],
      );
      await expectFields(
        withReward((r) => ((r as Body).recipient = 'Ada')),
        ['rewards[0].recipient'],
      );
      await expectFields(
        withReward((r) => ((r as Body).recipient = [{ name: 5 }])),
        ['rewards[0].recipient'],
      );
      await expectFields(
        withReward((r) => delete r.recipient.name),
        ['rewards[0].recipient.name'],
      );
      for (const name of ['', 5, null, 'x'.repeat(256)])
        await expectFields(
          withReward((r) => (r.recipient.name = name)),
          ['rewards[0].recipient.name'],
        );
    });

    it('checks the e-mail as IsEmail + Length(3, 254) do', async () => {
      for (const email of ['ada', 'ada@example', 'ada@@example.com', '', 5, `${'a'.repeat(250)}@b.co`]) {
        const [detail] = await expectFields(
          withReward((r) => (r.recipient.email = email)),
          ['rewards[0].recipient.email'],
        );
        expect(detail.reason).toMatch(/e-mail address/);
      }
      for (const email of ['a@b.co', 'first.last+tag@sub.example.org'])
        await expectFields(
          withReward((r) => (r.recipient.email = email)),
          [],
        );
    });

    it('checks the phone', async () => {
      for (const phone of ['12345', 'phone', '+1 415 555 0100 ext 9', '(415) 555-0100', 5])
        await expectFields(
          withReward((r) => (r.recipient.phone = phone)),
          ['rewards[0].recipient.phone'],
        );
      for (const phone of ['+14155550100', '415 (555) 0100', '020.7946.0958'])
        await expectFields(
          withReward((r) => (r.recipient.phone = phone)),
          [],
        );
    });

    it('needs a value: a denomination of 0.01–1000000 with at most two decimals, and a currency code', async () => {
      await expectFields(
        withReward((r) => delete (r as Body).value),
        ['rewards[0].value'],
      );
      await expectFields(
        withReward((r) => ((r as Body).value = [])),
        ['rewards[0].value'],
      );
      await expectFields(
        withReward((r) => (r.value = {})),
        ['rewards[0].value.denomination', 'rewards[0].value.currency_code'],
      );
      for (const denomination of [0, -5, 0.001, 1.234, 0.1 + 0.2, 1_000_000.01, 1e21, '25', null]) {
        const [detail] = await expectFields(
          withReward((r) => (r.value.denomination = denomination)),
          ['rewards[0].value.denomination'],
        );
        expect(detail.reason).toMatch(/at most two decimals/);
      }
      for (const currency_code of ['usd', 'US', 'USDX', 840, null])
        await expectFields(
          withReward((r) => (r.value.currency_code = currency_code)),
          ['rewards[0].value.currency_code'],
        );
    });

    it('refuses a denomination below 1e-6 that class-validator throws on', async () => {
      const input = withReward((r) => (r.value.denomination = 1e-7));
      expect(ajvFields(input)).toEqual(['rewards[0].value.denomination']);
      const outcome = await pipeOutcome(input);
      expect('thrown' in outcome && outcome.thrown).toBeInstanceOf(TypeError);
    });

    it('checks products: 1–10 strings of 1–200 characters, named as the list', async () => {
      for (const products of [
        [],
        Array.from({ length: 11 }, () => 'P'),
        [''],
        ['p'.repeat(201)],
        [5],
        'P',
        {},
      ])
        await expectFields(
          withReward((r) => (r.products = products)),
          ['rewards[0].products'],
        );
    });

    it('checks campaign_id', async () => {
      for (const campaign_id of ['abcd', 'ABC', 'A'.repeat(21), 'CAMP-1', 1234])
        await expectFields(
          withReward((r) => (r.campaign_id = campaign_id)),
          ['rewards[0].campaign_id'],
        );
      await expectFields(
        withReward((r) => (r.campaign_id = 'CAMPAIGNDEMO1')),
        [],
      );
    });

    it('checks the delivery method', async () => {
      for (const method of DELIVERY_METHODS)
        await expectFields(
          withReward((r) => (r.delivery = { method })),
          [],
        );
      for (const method of ['FAX', 'email', null, 1]) {
        const [detail] = await expectFields(
          withReward((r) => (r.delivery = { method })),
          ['rewards[0].delivery.method'],
        );
        expect(detail.reason).toMatch(/one of EMAIL, LINK, PHONE/);
      }
      await expectFields(
        withReward((r) => (r.delivery = {})),
        ['rewards[0].delivery.method'],
      );
      await expectFields(
        withReward((r) => (r.delivery = 'EMAIL')),
        ['rewards[0].delivery'],
      );
    });

    it('refuses a delivery that is a list, as the pipe does (@IsObject on delivery)', async () => {
      for (const delivery of [[], [{ method: 'PHONE' }]]) {
        const input = withReward((r) => (r.delivery = delivery));
        expect(ajvFields(input)).toEqual(['rewards[0].delivery']);
        expect(await pipeFields(input)).toContain('rewards[0].delivery');
      }
    });

    it('checks the shape of custom_fields with customFieldsShapeProblem, with its reason', async () => {
      const shapes: Json[] = [
        'Sales',
        5,
        [{ id: 'F1' }],
        [{ id: 'F1', label: 'Dept', value: 'x' }],
        [{ value: 'x' }],
        [{ id: 'F1', value: 'x', extra: 1 }],
        [{ id: '', value: 'x' }],
        [{ label: 5, value: 'x' }],
        ['x'],
        [{ id: 'F1', value: { a: 1 } }],
        { Dept: { a: 1 } },
        { Dept: [1] },
        { Dept: 'x'.repeat(5001) },
        { ['L'.repeat(256)]: 'x' },
        { '': 'x' },
        Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`L${i}`, 'x'])),
      ];
      for (const custom_fields of shapes) {
        const [detail] = await expectFields(
          withReward((r) => (r.custom_fields = custom_fields)),
          ['rewards[0].custom_fields'],
        );
        expect(detail.reason).toBe(`rewards[0].custom_fields ${customFieldsShapeProblem(custom_fields)}`);
      }
    });
  });

  describe('the body', () => {
    it('checks environment, funding_source_id and external_reference', async () => {
      for (const environment of ['staging', 'SANDBOX', 1])
        await expectFields({ ...body(), environment }, ['environment']);
      for (const environment of ['sandbox', 'production']) await expectFields({ ...body(), environment }, []);
      for (const funding_source_id of ['', 'f'.repeat(201), 5, ['BALANCE']])
        await expectFields({ ...body(), funding_source_id }, ['funding_source_id']);
      await expectFields({ ...body(), funding_source_id: 'f'.repeat(200) }, []);
      for (const external_reference of ['', 'e'.repeat(256), 5, {}])
        await expectFields({ ...body(), external_reference }, ['external_reference']);
      await expectFields({ ...body(), external_reference: 'e'.repeat(255) }, []);
    });

    it('refuses unknown properties at every level, named as the pipe names them', async () => {
      const r = reward() as Body & { recipient: Body; value: Body };
      r.extra = 1;
      r.recipient.extra = 1;
      r.value['7'] = 1;
      r.delivery = { method: 'EMAIL', extra: 1 };
      const details = await expectFields({ rewards: [r], extra: 1, '3': 1 }, [
        'extra',
        '3',
        'rewards[0].extra',
        'rewards[0].recipient.extra',
        'rewards[0].value[7]',
        'rewards[0].delivery.extra',
      ]);
      expect(details).toContainEqual({
        field: 'rewards[0].recipient.extra',
        reason: 'property rewards[0].recipient.extra is not allowed',
      });
      expect(await pipeOutcome({ rewards: [r], extra: 1, '3': 1 })).toEqual({
        details: expect.arrayContaining(details) as unknown,
      });
    });

    it('refuses keys named like Object.prototype members, which the pipe silently drops', async () => {
      // class-transformer skips a plain key whose name is a method of the target (valueOf, toString, ...),
      // so the DTO path never saw them; the schema treats them as the unknown properties they are.
      for (const name of ['valueOf', 'toString', 'hasOwnProperty', 'isPrototypeOf']) {
        const r = reward() as Body;
        r[name] = 0;
        expect(ajvFields({ rewards: [r], [name]: 0 })).toEqual([name, `rewards[0].${name}`]);
        expect(await pipeFields({ rewards: [r], [name]: 0 })).toEqual([]);
      }
    });

    it('reports every bad field at once, one detail each', async () => {
      await expectFields(
        {
          environment: 'x',
          rewards: [
            { recipient: { email: 'nope' }, value: { denomination: 1.234, currency_code: 'usd' } },
            {
              recipient: { name: 'Ada', phone: 'x' },
              value: { denomination: 1, currency_code: 'USD' },
              unknown: 1,
            },
          ],
        },
        [
          'environment',
          'rewards[0].recipient.name',
          'rewards[0].recipient.email',
          'rewards[0].value.denomination',
          'rewards[0].value.currency_code',
          'rewards[1].recipient.phone',
          'rewards[1].unknown',
        ],
      );
    });

    it('must be an object (the pipe names rewards instead)', async () => {
      for (const input of ['x', 5, true, [], [body()]]) {
        expect(validateSendBody(input, PIPE_MAX_REWARDS)).toEqual([
          { field: 'body', reason: 'the request body must be a JSON object' },
        ]);
        expect(await pipeFields(input)).toContain('rewards');
      }
    });
  });

  describe('agrees with the pipe on generated bodies (fast-check)', () => {
    const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']); // refused by jsonBody beforehand
    // Object.prototype's names (valueOf, toString, ...) are dropped by class-transformer, even inside
    // custom_fields, so the pipe never compares on them: tested on their own above.
    const PROTOTYPE_KEYS = new Set(Object.getOwnPropertyNames(Object.prototype));
    const key = fc.string({ maxLength: 12 }).filter((k) => !FORBIDDEN_KEYS.has(k) && !PROTOTYPE_KEYS.has(k));
    const text = (min: number, max: number) => fc.string({ minLength: min, maxLength: max });
    const orNull = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ arbitrary: arb, weight: 4 }, fc.constant(null));

    const fieldValue: fc.Arbitrary<Json> = fc.oneof(
      text(0, 20),
      fc.boolean(),
      fc.integer(),
      fc.array(text(0, 10), { maxLength: 4 }),
    );
    const customFields: fc.Arbitrary<Json> = fc.oneof(
      fc.dictionary(
        key.filter((k) => k.length > 0),
        fieldValue,
        { maxKeys: 4 },
      ),
      fc.array(
        fc.oneof(
          fc.record({ id: text(1, 20), value: fieldValue }),
          fc.record({ label: text(1, 20), value: fieldValue }),
        ),
        { maxLength: 4 },
      ),
    );
    const validReward: fc.Arbitrary<Body> = fc.record(
      {
        recipient: fc.record(
          {
            name: fc.oneof(text(1, 30), fc.constant('n'.repeat(255))),
            email: orNull(fc.constantFrom('ada@example.com', 'a.b+c@mail.example.org', 'x@y.io')),
            phone: orNull(fc.constantFrom('+14155550100', '415 (555) 0100', '+44 20 7946 0958')),
          },
          { requiredKeys: ['name'] },
        ),
        value: fc.record({
          denomination: fc.integer({ min: 1, max: 100_000_000 }).map((cents) => cents / 100),
          currency_code: fc.constantFrom('USD', 'EUR', 'GBP', 'JPY'),
        }),
        products: orNull(fc.array(text(1, 20), { minLength: 1, maxLength: 10 })),
        campaign_id: orNull(fc.stringMatching(/^[A-Z0-9]{4,20}$/)),
        delivery: orNull(fc.record({ method: fc.constantFrom(...DELIVERY_METHODS) })),
        custom_fields: orNull(customFields),
      },
      { requiredKeys: ['recipient', 'value'] },
    );
    const validBody: fc.Arbitrary<Body> = fc.record(
      {
        environment: orNull(fc.constantFrom('sandbox', 'production')),
        funding_source_id: orNull(fc.constantFrom('BALANCE', 'invoice', 'FS-123', 'f'.repeat(200))),
        external_reference: orNull(text(1, 40)),
        rewards: fc.array(validReward, { minLength: 1, maxLength: 4 }),
      },
      { requiredKeys: ['rewards'] },
    );

    /** Values that break (or happen to satisfy) the rules: near the limits, of the wrong type, or anything. */
    const anyValue: fc.Arbitrary<Json> = fc.oneof(
      fc.constantFrom<Json>(
        null,
        '',
        'x',
        'x'.repeat(200),
        'x'.repeat(201),
        'x'.repeat(255),
        'x'.repeat(256),
        '\u2764\uFE0F'.repeat(255),
        0,
        -1,
        0.005,
        0.01,
        0.29,
        1.234,
        1e-7,
        1.5e-7,
        1_000_000,
        1_000_000.01,
        1e21,
        true,
        [],
        {},
        ['x'],
        [{}],
        [1],
        'USD',
        'usd',
        'EMAIL',
        'FAX',
        'sandbox',
        'staging',
        'a@b.co',
        'a@b',
        'not an e-mail',
        '+14155550100',
        '12345',
        'CAMPAIGN1',
        'abcd',
      ),
      text(0, 8),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.integer(),
      fc.emailAddress(),
      fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
      validReward,
      customFields,
      fc.array(validReward, { maxLength: 2 }),
    );
    const mutation = fc.oneof(
      {
        arbitrary: fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: anyValue }),
        weight: 10,
      },
      { arbitrary: fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }), weight: 4 },
      {
        arbitrary: fc.record({
          kind: fc.constant('add' as const),
          at: fc.nat(),
          key: fc.oneof(
            fc.constantFrom('extra', '7', 'name', 'email', 'method', 'value', 'products', 'rewards'),
            key,
          ),
          value: anyValue,
        }),
        weight: 5,
      },
      {
        arbitrary: fc.record({
          kind: fc.constant('many' as const),
          count: fc.constantFrom(SMALL_MAX_REWARDS, SMALL_MAX_REWARDS + 1),
        }),
        weight: 2,
      },
    );
    type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;

    /** Every place in the value (its path), the root first. */
    function places(value: Json, at: (string | number)[] = [], into: (string | number)[][] = []) {
      into.push(at);
      if (Array.isArray(value)) value.forEach((item, i) => places(item, [...at, i], into));
      else if (value && typeof value === 'object')
        for (const [k, item] of Object.entries(value)) places(item, [...at, k], into);
      return into;
    }

    function mutate(original: Body, mutations: Mutation[]): Body {
      const root = structuredClone(original);
      for (const m of mutations) {
        if (m.kind === 'many') {
          const first = Array.isArray(root.rewards) ? root.rewards[0] : null;
          root.rewards = Array.from({ length: m.count }, () => structuredClone(first ?? {}));
          continue;
        }
        const all = places(root);
        const path = all[m.at % all.length];
        const parent = path.slice(0, -1).reduce<Json>((node, k) => (node as Record<string, Json>)[k], root);
        const last = path.at(-1);
        if (m.kind === 'add') {
          const node = path.reduce<Json>((n, k) => (n as Record<string, Json>)[k], root);
          if (node && typeof node === 'object' && !Array.isArray(node))
            node[m.key] = structuredClone(m.value);
        } else if (last !== undefined && parent && typeof parent === 'object') {
          if (m.kind === 'set') (parent as Record<string, Json>)[last] = structuredClone(m.value);
          else if (Array.isArray(parent)) parent.splice(Number(last), 1);
          else delete parent[last];
        }
      }
      return JSON.parse(JSON.stringify(root)) as Body; // what an HTTP body can be
    }

    const hasForbiddenKey = (value: Json): boolean =>
      places(value).some((path) => path.some((k) => typeof k === 'string' && FORBIDDEN_KEYS.has(k)));

    /** The rewards whose delivery is a list: the pipe accepts those (see above), the schema does not. */
    function listDeliveries(input: Body): string[] {
      if (!Array.isArray(input.rewards)) return [];
      return input.rewards.flatMap((r, i) =>
        r && typeof r === 'object' && !Array.isArray(r) && Array.isArray(r.delivery)
          ? [`rewards[${i}].delivery`]
          : [],
      );
    }

    it('accepts what the generator calls valid, as the pipe does', async () => {
      await fc.assert(
        fc.asyncProperty(validBody, async (input) => {
          expect(validateSendBody(input, PIPE_MAX_REWARDS)).toEqual([]);
          expect(await pipeFields(input)).toEqual([]);
        }),
        { numRuns: 150 },
      );
    });

    it('accepts and refuses the same bodies, on the same top-level fields', async () => {
      expect(pipeLimitRule).toBeDefined();
      pipeLimitRule!.constraints[0] = SMALL_MAX_REWARDS;
      try {
        await fc.assert(
          fc.asyncProperty(
            validBody,
            fc.array(mutation, { minLength: 1, maxLength: 3 }),
            async (valid, mutations) => {
              const input = mutate(valid, mutations);
              fc.pre(!hasForbiddenKey(input));
              const ours = ajvFields(input, SMALL_MAX_REWARDS);
              const outcome = await pipeOutcome(input);
              if ('thrown' in outcome) {
                // class-validator's IsNumber({maxDecimalPlaces}) throws on 1e-7 and the like: the schema refuses them
                expect(outcome.thrown).toBeInstanceOf(TypeError);
                expect(ours.some((f) => /^rewards\[\d+\]\.value\.denomination$/.test(f))).toBe(true);
                return;
              }
              const theirs = outcome.details.map((d) => d.field ?? '');
              const lists = listDeliveries(input);
              for (const field of lists) if (!ours.includes('rewards')) expect(ours).toContain(field);
              const outside = (f: string) => !lists.some((l) => f === l || isUnder(f, l));
              expect(topLevel(ours.filter(outside))).toEqual(topLevel(theirs.filter(outside)));
              if (lists.length === 0) expect(ours.length === 0).toBe(theirs.length === 0);
            },
          ),
          { numRuns: 600 },
        );
      } finally {
        pipeLimitRule!.constraints[0] = PIPE_MAX_REWARDS;
      }
    });
  });
});
