import { HttpStatus } from '@nestjs/common';
import type { ErrorDetail } from '../common/app-error';
import { CUSTOM_FIELDS_MISMATCH, FieldsError, type FieldsErrorCode } from './fields-cache.errors';
import type { Field } from './fields-cache.service';

/** A string for every type; also a boolean (Checkbox), a number (Number, Currency), a list of options (List). */
export type CustomFieldValue = string | number | boolean | string[];

type CustomFieldEntry = { id?: string; label?: string; value: CustomFieldValue };
export type CustomFieldsInput = Record<string, CustomFieldValue> | CustomFieldEntry[];

export interface ResolvedCustomField {
  id: string;
  label: string;
  value: string;
}

export interface Resolution {
  resolved: ResolvedCustomField[][];
  unknown: ErrorDetail[];
  problems: ErrorDetail[];
  /** They decide the error code. */
  kinds: Set<'value' | 'required' | 'duplicate'>;
}

const MAX_VALUE_LENGTH = 5000;
const DECIMAL = /^-?\d{1,15}(\.\d+)?$/;

function isDate(text: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  return (
    !!m &&
    new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))).toISOString().slice(0, 10) === text
  );
}

/** Per scalar `data_type` (lower case): whether a value is valid, and what the field takes when it is not. */
const SCALARS: Record<string, [valid: (text: string) => boolean, takes: string]> = {
  number: [(t) => DECIMAL.test(t), 'takes a number'],
  currency: [(t) => DECIMAL.test(t) && !/\.\d{3,}$/.test(t), 'takes an amount with at most two decimals'],
  date: [isDate, 'takes a date as YYYY-MM-DD'],
  email: [(t) => /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(t) && t.length <= 254, 'takes an e-mail address'],
  phone: [
    (t) => /^\+?[0-9][0-9 ().-]{5,24}$/.test(t),
    'takes a phone number (digits, an optional leading +)',
  ],
  text: [(t) => t.length <= 255, 'takes at most 255 characters'],
  textarea: [(t) => t.length <= MAX_VALUE_LENGTH, `takes at most ${MAX_VALUE_LENGTH} characters`],
};

/**
 * A value checked against the field's `data_type` (spec note §2), as the string the service takes, or why it is
 * refused. An unknown type passes a string through. List values go upstream comma-separated (as the sandbox reads).
 */
export function fieldValue(
  field: Field,
  value: CustomFieldValue,
): { value: string } | { reason: string; allowed_values?: string[] } {
  const type = field.data_type.toLowerCase();
  if (type === 'list') {
    const items = Array.isArray(value)
      ? value
      : typeof value === 'string'
        ? value
            .split(',')
            .map((v) => v.trim())
            .filter(Boolean)
        : null;
    if (!items) return { reason: `"${field.label}" takes a list of options` };
    const options = field.options ?? [];
    const outside = items.filter((v) => !options.includes(v));
    if (outside.length)
      return {
        reason: `${outside.map((v) => `"${v}"`).join(', ')} not an option of "${field.label}"`,
        allowed_values: options,
      };
    if (new Set(items).size !== items.length) return { reason: `"${field.label}" lists an option twice` };
    if (items.some((v) => v.includes(',')))
      return { reason: `an option with a comma cannot be sent in the list "${field.label}"` };
    return { value: items.join(',') };
  }
  if (Array.isArray(value)) return { reason: `"${field.label}" takes one value, not a list` };
  if (type === 'checkbox') {
    const v = typeof value === 'boolean' ? String(value) : String(value).toLowerCase();
    return v === 'true' || v === 'false'
      ? { value: v }
      : { reason: `"${field.label}" is a checkbox: true or false` };
  }
  const text = String(value);
  if (Object.hasOwn(SCALARS, type)) {
    const [valid, takes] = SCALARS[type];
    return valid(text) ? { value: text } : { reason: `"${field.label}" ${takes}` };
  }
  if (field.options && !field.options.includes(text))
    return { reason: `"${text}" is not an option of "${field.label}"`, allowed_values: field.options };
  return { value: text };
}

/** Resolves labels (or ids) to field ids and validates the values against the cached fields. */
export function resolveCustomFields(
  fields: Field[],
  rewards: { custom_fields?: CustomFieldsInput | null }[],
): Resolution {
  const byId = new Map(fields.map((f) => [f.id, f]));
  const byLabel = new Map(fields.map((f) => [f.label, f]));
  const unknown: ErrorDetail[] = [];
  const problems: ErrorDetail[] = [];
  const kinds: Resolution['kinds'] = new Set();
  const problem = (kind: 'value' | 'required' | 'duplicate', detail: ErrorDetail) => {
    kinds.add(kind);
    problems.push(detail);
  };
  const known = fields.map((f) => f.label);
  const resolved = rewards.map((reward, i) => {
    const base = `rewards[${i}].custom_fields`;
    const input = reward.custom_fields ?? [];
    // The object form (label → value) as the list form, each entry with its path.
    const entries: [CustomFieldEntry, string][] = Array.isArray(input)
      ? input.map((entry, j) => [entry, `${base}[${j}]`])
      : Object.entries(input).map(([label, value]) => [{ label, value }, `${base}.${label}`]);
    const out: ResolvedCustomField[] = [];
    const seen = new Set<string>();
    for (const [entry, path] of entries) {
      const key = entry.id ?? entry.label ?? '';
      const field = entry.id !== undefined ? byId.get(key) : byLabel.get(key);
      if (!field) {
        const reason = `unknown custom field ${entry.id !== undefined ? 'id' : 'label'} "${key}"`;
        unknown.push({ field: path, reason, known_labels: known });
        continue;
      }
      if (seen.has(field.id)) {
        problem('duplicate', { field: path, reason: `custom field "${field.label}" is given twice` });
        continue;
      }
      seen.add(field.id);
      const checked = fieldValue(field, entry.value);
      if ('reason' in checked) {
        problem('value', { field: path, ...checked });
        continue;
      }
      if (field.required && checked.value === '') {
        problem('required', { field: path, reason: `custom field "${field.label}" is required` });
        continue;
      }
      out.push({ id: field.id, label: field.label, value: checked.value });
    }
    for (const field of fields) {
      if (field.required && !seen.has(field.id))
        problem('required', {
          field: `${base}.${field.label}`,
          reason: `custom field "${field.label}" is required`,
        });
    }
    return out;
  });
  return { resolved, unknown, problems, kinds };
}

export function customFieldsError(resolution: Resolution): FieldsError | null {
  const details = [...resolution.unknown, ...resolution.problems];
  if (details.length === 0) return null;
  const code: FieldsErrorCode = resolution.unknown.length
    ? 'unknown_custom_field'
    : resolution.kinds.has('value')
      ? 'invalid_custom_field_value'
      : resolution.kinds.has('required')
        ? 'missing_required_custom_field'
        : 'invalid_custom_fields';
  return new FieldsError(HttpStatus.UNPROCESSABLE_ENTITY, code, CUSTOM_FIELDS_MISMATCH, details);
}
