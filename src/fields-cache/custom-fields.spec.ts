import { customFieldsError, customFieldsShapeProblem, resolveCustomFields } from './custom-fields';
import type { Field } from './fields-cache.service';

const fields: Field[] = [
  { id: 'f1', label: 'Department', data_type: 'Dropdown', options: ['Sales', 'Support'], required: true },
  { id: 'f2', label: 'Region', data_type: 'Dropdown', options: ['EMEA', 'AMER'], required: false },
];

describe('custom fields', () => {
  it('resolves labels and ids to ids, keeping labels', () => {
    const r = resolveCustomFields(fields, [{ custom_fields: { Department: 'Sales' } }, { custom_fields: [{ id: 'f1', value: 'Support' }, { label: 'Region', value: 'EMEA' }] }]);
    expect(r.unknown).toEqual([]);
    expect(r.problems).toEqual([]);
    expect(r.resolved).toEqual([[{ id: 'f1', label: 'Department', value: 'Sales' }], [{ id: 'f1', label: 'Department', value: 'Support' }, { id: 'f2', label: 'Region', value: 'EMEA' }]]);
  });

  it('lists the known labels for an unknown one', () => {
    const r = resolveCustomFields(fields, [{ custom_fields: { Department: 'Sales', Team: 'Red' } }]);
    expect(r.unknown).toEqual([{ field: 'rewards[0].custom_fields.Team', reason: expect.stringContaining('Team'), known_labels: ['Department', 'Region'] }]);
    expect(customFieldsError(r)?.code).toBe('unknown_custom_field');
  });

  it('lists the options for a value that is not one, and names a missing required field', () => {
    const bad = resolveCustomFields(fields, [{ custom_fields: { Department: 'Legal' } }]);
    expect(bad.problems[0]).toMatchObject({ field: 'rewards[0].custom_fields.Department', allowed_values: ['Sales', 'Support'] });
    expect(customFieldsError(bad)?.code).toBe('invalid_custom_field_value');
    const missing = resolveCustomFields(fields, [{ custom_fields: { Region: 'EMEA' } }]);
    expect(missing.problems).toEqual([{ field: 'rewards[0].custom_fields.Department', reason: 'custom field "Department" is required' }]);
    expect(customFieldsError(missing)?.code).toBe('missing_required_custom_field');
  });

  it('checks the input shape', () => {
    expect(customFieldsShapeProblem({ A: 'x' })).toBeNull();
    expect(customFieldsShapeProblem([{ id: 'f1', value: 'x' }])).toBeNull();
    expect(customFieldsShapeProblem([{ id: 'f1', label: 'A', value: 'x' }])).toMatch(/exactly one/);
    expect(customFieldsShapeProblem({ A: 5 })).toMatch(/string/);
    expect(customFieldsShapeProblem('x')).toMatch(/object/);
  });
});
