import request from 'supertest';
import { get } from './support/sandbox';
import { apiGet, sendOrder, singleOrder, useSandbox } from './support/sandbox-orders';

/** Custom-field data types (spec rewards-service-current.md §2), each valid and invalid, over real HTTP. */
const FIELDS = [
  { id: 'FLDCHECK', label: 'Opted In', data_type: 'Checkbox', required: false },
  { id: 'FLDMONEY', label: 'Budget', data_type: 'Currency', required: false },
  { id: 'FLDDATE', label: 'Start Date', data_type: 'Date', required: false },
  {
    id: 'FLDDROP',
    label: 'Department',
    data_type: 'Dropdown',
    data: { options: ['Sales', 'Engineering'] },
    required: false,
  },
  { id: 'FLDMAIL', label: 'Manager Email', data_type: 'Email', required: false },
  {
    id: 'FLDLIST',
    label: 'Skills',
    data_type: 'List',
    data: { options: ['Go', 'Rust', 'Type Script'] },
    required: false,
  },
  { id: 'FLDNUM', label: 'Score', data_type: 'Number', required: false },
  { id: 'FLDPHONE', label: 'Desk Phone', data_type: 'Phone', required: false },
  { id: 'FLDTEXT', label: 'Note', data_type: 'Text', required: false },
  { id: 'FLDAREA', label: 'Citation', data_type: 'TextArea', required: false },
];

const CASES: [type: string, fieldId: string, valid: string[], invalid: unknown[]][] = [
  ['Checkbox', 'FLDCHECK', ['true', 'false'], ['yes', 'TRUE', '1', true]],
  ['Currency', 'FLDMONEY', ['10', '10.5', '10.55', '-3.20'], ['10.555', '1,000', 'ten', '$10']],
  [
    'Date',
    'FLDDATE',
    ['2026-02-28', '2024-02-29'],
    ['2026-02-30', '2025-02-29', '28/02/2026', '2026-2-28', '2026-02-28T10:00:00Z'],
  ],
  ['Dropdown', 'FLDDROP', ['Sales', 'Engineering'], ['sales', 'Legal', 'Sales,Engineering']],
  ['Email', 'FLDMAIL', ['boss@example.com'], ['boss', 'boss@', 'a b@example.com']],
  ['List', 'FLDLIST', ['Go', 'Go,Rust', 'Rust, Type Script'], ['Go,Go', 'Go,Java', 'go', 'Go,,Rust']],
  ['Number', 'FLDNUM', ['42', '-7', '3.14159'], ['4e2', 'forty', '1,5', '.5']],
  [
    'Phone',
    'FLDPHONE',
    ['+14155550100', '+44 20-7946-0958', '4155550100'],
    ['555', '+1 (415) 555-0100', 'phone'],
  ],
  ['Text', 'FLDTEXT', ['hello', 'x'.repeat(255)], ['x'.repeat(256), 7]],
  ['TextArea', 'FLDAREA', ['line 1\nline 2', 'x'.repeat(5000)], ['x'.repeat(5001)]],
];

describe('sandbox: custom field data types', () => {
  const sb = useSandbox();
  const withField = (id: string, value: unknown) => singleOrder({}, { custom_fields: [{ id, value }] });

  beforeEach(async () => {
    const res = await request(sb.baseUrl).put('/__control/accounts/acc_demo/fields').send({ fields: FIELDS });
    expect(res.status).toBe(200);
  });

  it('lists the fields with data only for Dropdown and List', async () => {
    const fields = (await apiGet(sb.baseUrl, '/fields')).body.fields as {
      id: string;
      data_type: string;
      data: unknown;
    }[];
    expect(fields.map((f) => f.data_type)).toEqual(CASES.map(([type]) => type));
    for (const f of fields) {
      if (f.data_type === 'Dropdown' || f.data_type === 'List')
        expect(f.data).toEqual({ options: expect.any(Array) });
      else expect(f.data).toEqual({});
    }
  });

  describe.each(CASES)('%s', (_type, fieldId, valid, invalid) => {
    it.each(valid.map((v) => [JSON.stringify(v).slice(0, 40), v]))('accepts %s', async (_shown, value) => {
      const res = await sendOrder(sb.baseUrl, withField(fieldId, value));
      expect(res.status).toBe(200);
      const label = FIELDS.find((f) => f.id === fieldId)?.label;
      expect(res.body.order.rewards[0].custom_fields).toEqual([{ id: fieldId, value, label }]);
    });

    it.each(invalid.map((v) => [JSON.stringify(v).slice(0, 40), v]))(
      'refuses %s with 400 naming the value',
      async (_shown, value) => {
        const res = await sendOrder(sb.baseUrl, withField(fieldId, value));
        expect(res.status).toBe(400);
        expect(res.body.errors.payload).toEqual({ 'reward.custom_fields[0].value': value });
        expect((await get(sb.baseUrl, '/__control/orders')).body.total_count).toBe(0);
      },
    );
  });

  it('treats a null value of an optional field as absent, and refuses a required field that is null, empty or missing', async () => {
    const optional = await sendOrder(sb.baseUrl, withField('FLDDATE', null));
    expect(optional.status).toBe(200);
    expect(optional.body.order.rewards[0].custom_fields).toEqual([]);
    const required = FIELDS.map((f) => (f.id === 'FLDDATE' ? { ...f, required: true } : f));
    expect(
      (await request(sb.baseUrl).put('/__control/accounts/acc_demo/fields').send({ fields: required }))
        .status,
    ).toBe(200);
    for (const custom of [[{ id: 'FLDDATE', value: null }], [{ id: 'FLDDATE', value: '' }], []]) {
      const res = await sendOrder(sb.baseUrl, singleOrder({}, { custom_fields: custom }));
      expect(res.status).toBe(400);
      expect(res.body.errors.payload).toEqual({
        'reward.custom_fields': { id: 'FLDDATE', label: 'Start Date' },
      });
    }
    expect((await sendOrder(sb.baseUrl, withField('FLDDATE', '2026-01-31'))).status).toBe(200);
  });

  it.each([
    ['an unknown data type', [{ id: 'FLDX', label: 'X', data_type: 'Colour', required: false }]],
    ['a Dropdown without options', [{ id: 'FLDX', label: 'X', data_type: 'Dropdown', required: false }]],
    [
      'a List with an empty options array',
      [{ id: 'FLDX', label: 'X', data_type: 'List', data: { options: [] }, required: false }],
    ],
    ['an id of the wrong form', [{ id: 'fld_x', label: 'X', data_type: 'Text', required: false }]],
    ['a field that is not an object', ['FLDX']],
    ['fields that are not an array', { id: 'FLDX' }],
  ])('refuses to seed %s through /__control (400, fields unchanged)', async (_name, fields) => {
    const res = await request(sb.baseUrl).put('/__control/accounts/acc_demo/fields').send({ fields });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual(expect.any(String));
    expect((await apiGet(sb.baseUrl, '/fields')).body.fields).toHaveLength(FIELDS.length);
  });
});
