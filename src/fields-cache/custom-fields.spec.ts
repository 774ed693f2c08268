import { customFieldsError, fieldValue, resolveCustomFields } from './custom-fields';
import type { Field } from './fields-cache.service';

const fields: Field[] = [
  { id: 'f1', label: 'Department', data_type: 'Dropdown', options: ['Sales', 'Support'], required: true },
  { id: 'f2', label: 'Region', data_type: 'Dropdown', options: ['EMEA', 'AMER'], required: false },
];

describe('custom fields', () => {
  it('resolves labels and ids to ids, keeping labels', () => {
    const r = resolveCustomFields(fields, [
      { custom_fields: { Department: 'Sales' } },
      {
        custom_fields: [
          { id: 'f1', value: 'Support' },
          { label: 'Region', value: 'EMEA' },
        ],
      },
    ]);
    expect(r.unknown).toEqual([]);
    expect(r.problems).toEqual([]);
    expect(r.resolved).toEqual([
      [{ id: 'f1', label: 'Department', value: 'Sales' }],
      [
        { id: 'f1', label: 'Department', value: 'Support' },
        { id: 'f2', label: 'Region', value: 'EMEA' },
      ],
    ]);
  });

  it('lists the known labels for an unknown one', () => {
    const r = resolveCustomFields(fields, [{ custom_fields: { Department: 'Sales', Team: 'Red' } }]);
    expect(r.unknown).toEqual([
      {
        field: 'rewards[0].custom_fields.Team',
        reason: expect.stringContaining('Team'),
        known_labels: ['Department', 'Region'],
      },
    ]);
    expect(customFieldsError(r)?.code).toBe('unknown_custom_field');
  });

  it('lists the options for a value that is not one, and names a missing required field', () => {
    const bad = resolveCustomFields(fields, [{ custom_fields: { Department: 'Legal' } }]);
    expect(bad.problems[0]).toMatchObject({
      field: 'rewards[0].custom_fields.Department',
      allowed_values: ['Sales', 'Support'],
    });
    expect(customFieldsError(bad)?.code).toBe('invalid_custom_field_value');
    const missing = resolveCustomFields(fields, [{ custom_fields: { Region: 'EMEA' } }]);
    expect(missing.problems).toEqual([
      { field: 'rewards[0].custom_fields.Department', reason: 'custom field "Department" is required' },
    ]);
    expect(customFieldsError(missing)?.code).toBe('missing_required_custom_field');
  });

  describe('values by data type', () => {
    const field = (data_type: string, options: string[] | null = null): Field => ({
      id: 'F',
      label: 'L',
      data_type,
      options,
      required: false,
    });
    it.each([
      ['Checkbox', true, 'true'],
      ['Checkbox', 'FALSE', 'false'],
      ['Number', 12.5, '12.5'],
      ['Number', '-3', '-3'],
      ['Currency', '19.99', '19.99'],
      ['Date', '2026-02-28', '2026-02-28'],
      ['Email', 'a@b.co', 'a@b.co'],
      ['Phone', '+44 20 7946 0958', '+44 20 7946 0958'],
      ['Text', 'hello', 'hello'],
      ['TextArea', 'x'.repeat(3000), 'x'.repeat(3000)],
      ['Dropdown', 'Sales', 'Sales'],
      ['List', ['Sales', 'Support'], 'Sales,Support'],
      ['List', 'Sales, Support', 'Sales,Support'],
      ['SomethingNew', 'anything', 'anything'],
    ])('accepts a %s value %p as %p', (type, input, sent) => {
      expect(
        fieldValue(field(type, type === 'SomethingNew' ? null : ['Sales', 'Support']), input as never),
      ).toEqual({ value: sent });
    });
    it.each([
      ['Checkbox', 'yes', /true or false/],
      ['Number', 'twelve', /number/],
      ['Currency', '1.999', /two decimals/],
      ['Date', '2026-02-30', /YYYY-MM-DD/],
      ['Date', '30/01/2026', /YYYY-MM-DD/],
      ['Email', 'nope', /e-mail/],
      ['Phone', 'call me', /phone/],
      ['Text', 'x'.repeat(256), /255/],
      ['Dropdown', 'Legal', /not an option/],
      ['List', ['Sales', 'Legal'], /not an option/],
      ['List', ['Sales', 'Sales'], /twice/],
      ['Dropdown', ['Sales'], /one value/],
    ])('refuses a %s value %p', (type, input, reason) => {
      const r = fieldValue(field(type, ['Sales', 'Support']), input as never);
      expect('reason' in r && r.reason).toMatch(reason);
    });
    it('reports a typed problem as invalid_custom_field_value, naming the field', () => {
      const r = resolveCustomFields([field('Date')], [{ custom_fields: { L: 'soon' } }]);
      expect(customFieldsError(r)).toMatchObject({
        code: 'invalid_custom_field_value',
        details: [{ field: 'rewards[0].custom_fields.L' }],
      });
    });
  });
});
