import { DELIVERY_METHODS } from '../../rewards-api/rewards-api.types';
import {
  MAX_SEND_BODY_DETAILS,
  type RewardSpecDto,
  type SendRewardsDto,
  validateSendBody,
} from './send-rewards.dto';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const reward = (): { [key: string]: Json } => ({
  recipient: { name: 'Ada Lovelace', email: 'ada@example.com' },
  value: { denomination: 25, currency_code: 'USD' },
  products: ['PRODAMAZONUS'],
});
const body = () => ({ rewards: [reward()] });

/** A valid body whose reward has `value` at `path` (`recipient.email`, `delivery.method`); `undefined` removes it. */
function rewardWith(path: string, value: Json | undefined) {
  const r = reward();
  const names = path.split('.');
  const last = names.pop() as string;
  const parent = names.reduce((node, name) => (node[name] ??= {}) as { [key: string]: Json }, r);
  if (value === undefined) delete parent[last];
  else parent[last] = value;
  return { rewards: [r] };
}

const fields = (input: unknown, maxRewards = 10_000) =>
  validateSendBody(input, maxRewards).map((d) => d.field);

/** The one detail of `input`, which must name `field`. */
function onlyDetail(input: unknown, field: string) {
  const details = validateSendBody(input, 10_000);
  expect(details.map((d) => d.field)).toEqual([field]);
  return details[0];
}

/** Why a reward with `value` at `path` is refused: one detail, naming `rewards[0].<path>`. */
const reasonAt = (path: string, value: Json | undefined) =>
  onlyDetail(rewardWith(path, value), `rewards[0].${path}`).reason;

const acceptedAt = (path: string, value: Json) => expect(fields(rewardWith(path, value))).toEqual([]);

describe('the send body schema', () => {
  it('accepts a minimal body, one with every optional property, and null for each optional property', () => {
    expect(fields(body())).toEqual([]);
    const full: SendRewardsDto = {
      environment: 'production',
      funding_source_id: 'f'.repeat(200),
      external_reference: 'e'.repeat(255),
      rewards: [
        {
          recipient: {
            name: 'x'.repeat(255),
            email: 'first.last+tag@sub.example.org',
            phone: '+44 20 7946 0958',
          },
          value: { denomination: 1_000_000, currency_code: 'EUR' },
          campaign_id: 'CAMPAIGNDEMO1',
          delivery: { method: 'PHONE' },
          custom_fields: { Department: 'Sales', Headcount: 3, Remote: true, Tags: ['a', 'b'] },
        },
        {
          recipient: { name: 'Grace' },
          value: { denomination: 0.01, currency_code: 'GBP' },
          products: Array.from({ length: 10 }, () => 'p'.repeat(200)),
          delivery: { method: 'LINK' },
          custom_fields: [
            { id: 'FLDDEPARTMENT', value: 'Sales' },
            { label: 'Region', value: 'EMEA' },
          ],
        },
      ],
    };
    expect(fields(full)).toEqual([]);
    const nulls: SendRewardsDto = {
      environment: null,
      funding_source_id: null,
      external_reference: null,
      rewards: [
        {
          recipient: { name: 'Ada', email: null, phone: null },
          value: { denomination: 5, currency_code: 'USD' },
          products: null,
          campaign_id: null,
          delivery: null,
          custom_fields: null,
        },
      ],
    };
    expect(fields(nulls)).toEqual([]);
  });

  it('does not modify the body', () => {
    const input = { ...body(), extra: 1 };
    const copy = structuredClone(input);
    validateSendBody(input, 10_000);
    expect(input).toEqual(copy);
  });

  describe('the body', () => {
    it('is a JSON object; a missing body is taken as {}', () => {
      for (const input of ['x', 5, true, [], [body()]])
        expect(validateSendBody(input, 10_000)).toEqual([
          { field: 'body', reason: 'the request body must be a JSON object' },
        ]);
      for (const input of [null, undefined, {}])
        expect(validateSendBody(input, 10_000)).toEqual([
          { field: 'rewards', reason: 'rewards is required and must be a list of 1–10000 rewards' },
        ]);
    });

    it('checks environment, funding_source_id and external_reference', () => {
      const reasonOf = (name: string, value: Json) => onlyDetail({ ...body(), [name]: value }, name).reason;
      for (const value of ['staging', 'SANDBOX', 1])
        expect(reasonOf('environment', value)).toBe('environment must be one of sandbox, production');
      for (const value of ['', 'f'.repeat(201), 5, ['BALANCE']])
        expect(reasonOf('funding_source_id', value)).toBe(
          'funding_source_id must be a string of 1–200 characters',
        );
      for (const value of ['', 'e'.repeat(256), 5, {}])
        expect(reasonOf('external_reference', value)).toBe(
          'external_reference must be a string of 1–255 characters',
        );
      for (const environment of ['sandbox', 'production'])
        expect(fields({ ...body(), environment })).toEqual([]);
    });

    it('refuses unknown properties at every level, each named by its path', () => {
      const r = rewardWith('extra', 1).rewards[0] as { [key: string]: { [key: string]: Json } };
      r.recipient.extra = 1;
      r.value['7'] = 1;
      r.delivery = { method: 'EMAIL', extra: 1 };
      const details = validateSendBody({ rewards: [r], extra: 1, '3': 1, valueOf: 0 }, 10_000);
      expect(details.map((d) => d.field).sort()).toEqual(
        [
          '3',
          'extra',
          'valueOf',
          'rewards[0].extra',
          'rewards[0].recipient.extra',
          'rewards[0].value[7]',
          'rewards[0].delivery.extra',
        ].sort(),
      );
      expect(details).toContainEqual({
        field: 'rewards[0].recipient.extra',
        reason: 'property rewards[0].recipient.extra is not allowed',
      });
    });

    it('names every bad field at once, one detail each, at most MAX_SEND_BODY_DETAILS', () => {
      const input = {
        environment: 'x',
        rewards: [
          { recipient: { email: 'nope' }, value: { denomination: 1.234, currency_code: 'usd' } },
          {
            recipient: { name: 'Ada', phone: 'x' },
            value: { denomination: 1, currency_code: 'USD' },
            unknown: 1,
          },
        ],
      };
      const details = validateSendBody(input, 10_000);
      expect(details.map((d) => d.field)).toEqual([
        'environment',
        'rewards[0].recipient.name',
        'rewards[0].recipient.email',
        'rewards[0].value.denomination',
        'rewards[0].value.currency_code',
        'rewards[1].recipient.phone',
        'rewards[1].unknown',
      ]);
      for (const d of details) expect(d.reason).toContain(d.field);

      const many = validateSendBody({ rewards: Array.from({ length: 1_000 }, () => ({})) }, 10_000);
      expect(many).toHaveLength(MAX_SEND_BODY_DETAILS);
      expect(many[0].field).toBe('rewards[0].recipient');
      expect(many.at(-1)?.field).toBe('rewards[49].value');
    });
  });

  describe('rewards', () => {
    it('is a list of at least one reward', () => {
      for (const rewards of [null, 'x', { recipient: {} }, []])
        expect(onlyDetail({ rewards }, 'rewards').reason).toBe('rewards must be a list of 1–10000 rewards');
    });

    it('holds at most the gateway’s limit, refused without looking at the rewards', () => {
      const three = { rewards: [{}, {}, {}] };
      expect(validateSendBody(three, 2)).toEqual([
        { field: 'rewards', reason: 'rewards must contain at most 2 rewards (it has 3)' },
      ]);
      expect(fields(three, 3)).toHaveLength(6);
      const batch = { rewards: Array.from({ length: 10_000 }, reward) };
      expect(validateSendBody(batch, 10_000)).toEqual([]);
      expect(fields({ rewards: [...batch.rewards, reward()] }, 20_000)).toEqual(['rewards']);
    });

    it('holds objects, each item that is not one named', () => {
      expect(validateSendBody({ rewards: [reward(), 'x', null, 5, [], [reward()]] }, 10_000)).toEqual(
        [1, 2, 3, 4, 5].map((i) => ({
          field: `rewards[${i}]`,
          reason: `rewards[${i}] must be an object {recipient, value, products, campaign_id, delivery, custom_fields}`,
        })),
      );
    });
  });

  describe('a reward', () => {
    it('needs a recipient, an object with a name of 1–255 characters', () => {
      expect(reasonAt('recipient', undefined)).toBe(
        'rewards[0].recipient is required and must be an object {name, email, phone}',
      );
      for (const recipient of ['Ada', [{ name: 'Ada' }], null])
        expect(reasonAt('recipient', recipient)).toBe(
          'rewards[0].recipient must be an object {name, email, phone}',
        );
      expect(reasonAt('recipient.name', undefined)).toBe(
        'rewards[0].recipient.name is required and must be a string of 1–255 characters',
      );
      for (const name of ['', 5, null, 'x'.repeat(256)])
        expect(reasonAt('recipient.name', name)).toBe(
          'rewards[0].recipient.name must be a string of 1–255 characters',
        );
    });

    it('counts characters, not UTF-16 units', () => {
      acceptedAt('recipient.name', '😀'.repeat(255));
      reasonAt('recipient.name', '😀'.repeat(256));
    });

    it('takes an e-mail address of at most 254 characters', () => {
      for (const email of [
        'ada',
        'ada@example',
        'ada@@example.com',
        'a b@example.com',
        '',
        5,
        `${'a'.repeat(250)}@b.co`,
      ])
        expect(reasonAt('recipient.email', email)).toBe(
          'rewards[0].recipient.email must be an e-mail address of at most 254 characters',
        );
      for (const email of ['a@b.co', 'first.last+tag@sub.example.org', 'ADA@EXAMPLE.COM'])
        acceptedAt('recipient.email', email);
    });

    it('takes a phone number: digits, spaces, dashes, dots or brackets, an optional leading +', () => {
      for (const phone of ['12345', 'phone', '+1 415 555 0100 ext 9', '(415) 555-0100', 5])
        expect(reasonAt('recipient.phone', phone)).toBe(
          'rewards[0].recipient.phone must be a phone number: digits, spaces or dashes, an optional leading +',
        );
      for (const phone of ['+14155550100', '415 (555) 0100', '020.7946.0958'])
        acceptedAt('recipient.phone', phone);
    });

    it('needs a value: a denomination of 0.01–1000000 in cents, and a currency code', () => {
      expect(reasonAt('value', undefined)).toBe(
        'rewards[0].value is required and must be an object {denomination, currency_code}',
      );
      expect(fields(rewardWith('value', {}))).toEqual([
        'rewards[0].value.denomination',
        'rewards[0].value.currency_code',
      ]);
      for (const denomination of [
        0,
        -5,
        0.001,
        1.234,
        0.015,
        25.000001,
        1e-7,
        1_000_000.01,
        999_999.999,
        1e21,
        '25',
        null,
      ])
        expect(reasonAt('value.denomination', denomination)).toBe(
          'rewards[0].value.denomination must be a number from 0.01 to 1000000 with at most two decimals',
        );
      // Amounts in cents whose division by 0.01 is not exact in floating point.
      for (const denomination of [0.29, 0.57, 1.1, 19.99, 894_784.94, 999_999.99])
        acceptedAt('value.denomination', denomination);
      for (const code of ['usd', 'US', 'USDX', 840, null])
        expect(reasonAt('value.currency_code', code)).toBe(
          'rewards[0].value.currency_code must be an ISO 4217 code such as USD',
        );
    });

    it('takes 1–10 products of 1–200 characters, the first bad one named by its index', () => {
      for (const products of [[], Array.from({ length: 11 }, () => 'P'), 'P', {}])
        expect(reasonAt('products', products)).toBe('rewards[0].products must be a list of 1–10 product ids');
      expect(validateSendBody(rewardWith('products', ['P', '', 'p'.repeat(201), 5]), 10_000)).toEqual([
        {
          field: 'rewards[0].products[1]',
          reason: 'rewards[0].products[1] must be a product id of 1–200 characters',
        },
      ]);
      for (const product of ['p'.repeat(201), 5])
        onlyDetail(rewardWith('products', ['P', product]), 'rewards[0].products[1]');
    });

    it('takes a campaign_id of 4–20 capital letters or digits', () => {
      for (const campaign of ['abcd', 'ABC', 'A'.repeat(21), 'CAMP-1', 1234])
        expect(reasonAt('campaign_id', campaign)).toBe(
          'rewards[0].campaign_id must be 4–20 capital letters or digits',
        );
      acceptedAt('campaign_id', 'CAMPAIGNDEMO1');
    });

    it('takes a delivery {method} with a known method', () => {
      for (const method of DELIVERY_METHODS) acceptedAt('delivery', { method });
      for (const method of ['FAX', 'email', null, 1])
        expect(reasonAt('delivery.method', method)).toBe(
          'rewards[0].delivery.method must be one of EMAIL, LINK, PHONE',
        );
      onlyDetail(rewardWith('delivery', {}), 'rewards[0].delivery.method');
      for (const delivery of ['EMAIL', [], [{ method: 'PHONE' }]])
        expect(reasonAt('delivery', delivery)).toBe('rewards[0].delivery must be an object {method}');
    });

    it('takes custom_fields by label or as a list of {id or label, value}, named as a whole when malformed', () => {
      const good: Json[] = [
        {},
        [],
        {
          Dept: 'x'.repeat(5_000),
          N: -1.5,
          B: false,
          L: Array.from({ length: 100 }, () => 'o'.repeat(1_000)),
        },
        Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`L${i}`, 'x'])),
        [
          { id: 'F1', value: 'x' },
          { label: 'L'.repeat(255), value: ['a'] },
        ],
      ];
      for (const customFields of good) acceptedAt('custom_fields', customFields);
      const bad: Json[] = [
        'Sales',
        5,
        [{ id: 'F1' }],
        [{ id: 'F1', label: 'Dept', value: 'x' }],
        [{ value: 'x' }],
        [{ id: 'F1', value: 'x', extra: 1 }],
        [{ id: '', value: 'x' }],
        [{ label: 5, value: 'x' }],
        [{ id: 'F1', value: null }],
        ['x'],
        [{ id: 'F1', value: { a: 1 } }],
        { Dept: { a: 1 } },
        { Dept: null },
        { Dept: [1] },
        { Dept: 'x'.repeat(5_001) },
        { Dept: Array.from({ length: 101 }, () => 'o') },
        Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`L${i}`, 'x'])),
        Array.from({ length: 101 }, () => ({ id: 'F1', value: 'x' })),
      ];
      for (const customFields of bad)
        expect(reasonAt('custom_fields', customFields)).toMatch(
          /^rewards\[0\]\.custom_fields must be \{"<label>": <value>\} or \[\{"id" or "label"/,
        );
    });
  });

  it('types the body as the schema describes it', () => {
    const r: RewardSpecDto = { recipient: { name: 'Ada' }, value: { denomination: 1, currency_code: 'USD' } };
    // @ts-expect-error a reward needs a value
    const noValue: RewardSpecDto = { recipient: { name: 'Ada' } };
    // @ts-expect-error unknown delivery method
    const fax: RewardSpecDto['delivery'] = { method: 'FAX' };
    // @ts-expect-error a custom-field entry names an id or a label
    const neither: RewardSpecDto['custom_fields'] = [{ value: 'x' }];
    expect([r, noValue, fax, neither]).toHaveLength(4);
  });
});
