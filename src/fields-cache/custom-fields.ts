import { HttpStatus } from '@nestjs/common';
import type { ErrorDetail } from '../common/app-error';
import { AppError } from '../common/app-error';
import type { Field } from './fields-cache.service';

/** What a caller may send per reward: `{"<label>": "<value>"}` or `[{id|label, value}]`. */
export type CustomFieldsInput = Record<string, string> | { id?: string; label?: string; value: string }[];

export interface ResolvedCustomField {
  id: string;
  label: string;
  value: string;
}

export interface Resolution {
  resolved: ResolvedCustomField[][];
  unknown: ErrorDetail[];
  problems: ErrorDetail[];
}

/** Checks the shape of `custom_fields` (used by the DTO validator). Returns a reason, or null when well-formed. */
export function customFieldsShapeProblem(value: unknown): string | null {
  if (Array.isArray(value)) {
    if (value.length > 100) return 'at most 100 custom fields';
    for (const entry of value) {
      if (!entry || typeof entry !== 'object' || Array.isArray(entry)) return 'each entry must be an object {id|label, value}';
      const e = entry as Record<string, unknown>;
      const keys = Object.keys(e);
      if (keys.some((k) => !['id', 'label', 'value'].includes(k))) return 'entries take only id, label and value';
      if ((e.id === undefined) === (e.label === undefined)) return 'each entry needs exactly one of id or label';
      if (e.id !== undefined && (typeof e.id !== 'string' || !e.id || e.id.length > 255)) return 'id must be a string of 1–255 characters';
      if (e.label !== undefined && (typeof e.label !== 'string' || !e.label || e.label.length > 255)) return 'label must be a string of 1–255 characters';
      if (typeof e.value !== 'string' || e.value.length > 1000) return 'value must be a string of at most 1000 characters';
    }
    return null;
  }
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length > 100) return 'at most 100 custom fields';
    for (const [label, v] of entries) {
      if (!label || label.length > 255) return 'labels must be 1–255 characters';
      if (typeof v !== 'string' || v.length > 1000) return `the value of "${label}" must be a string of at most 1000 characters`;
    }
    return null;
  }
  return 'must be an object {"<label>": "<value>"} or an array [{id|label, value}]';
}

/**
 * Resolves labels (or ids) to the upstream field ids and validates values against the cached fields: unknown
 * fields, Dropdown values outside the options, required fields missing, a field given twice.
 */
export function resolveCustomFields(fields: Field[], rewards: { custom_fields?: CustomFieldsInput }[]): Resolution {
  const byId = new Map(fields.map((f) => [f.id, f]));
  const byLabel = new Map(fields.map((f) => [f.label, f]));
  const unknown: ErrorDetail[] = [];
  const problems: ErrorDetail[] = [];
  const known = fields.map((f) => f.label);
  const resolved = rewards.map((reward, i) => {
    const base = `rewards[${i}].custom_fields`;
    const input = reward.custom_fields ?? [];
    const entries = Array.isArray(input)
      ? input.map((e, j) => ({ key: e.id ?? e.label ?? '', byId: e.id !== undefined, value: e.value, path: `${base}[${j}]` }))
      : Object.entries(input).map(([label, value]) => ({ key: label, byId: false, value, path: `${base}.${label}` }));
    const out: ResolvedCustomField[] = [];
    const seen = new Set<string>();
    for (const entry of entries) {
      const field = entry.byId ? byId.get(entry.key) : byLabel.get(entry.key);
      if (!field) {
        unknown.push({
          field: entry.path,
          reason: `unknown custom field ${entry.byId ? 'id' : 'label'} "${entry.key}"`,
          known_labels: known,
        });
        continue;
      }
      if (seen.has(field.id)) {
        problems.push({ field: entry.path, reason: `custom field "${field.label}" is given twice` });
        continue;
      }
      seen.add(field.id);
      if (field.options && !field.options.includes(entry.value)) {
        problems.push({ field: entry.path, reason: `"${entry.value}" is not an option of "${field.label}"`, allowed_values: field.options });
        continue;
      }
      out.push({ id: field.id, label: field.label, value: entry.value });
    }
    for (const field of fields) {
      if (field.required && !seen.has(field.id)) problems.push({ field: `${base}.${field.label}`, reason: `custom field "${field.label}" is required` });
    }
    return out;
  });
  return { resolved, unknown, problems };
}

export function customFieldsError(resolution: Resolution): AppError | null {
  const details = [...resolution.unknown, ...resolution.problems];
  if (details.length === 0) return null;
  const code = resolution.unknown.length
    ? 'unknown_custom_field'
    : details.some((d) => d.allowed_values)
      ? 'invalid_custom_field_value'
      : details.some((d) => /is required/.test(d.reason))
        ? 'missing_required_custom_field'
        : 'invalid_custom_fields';
  return new AppError(HttpStatus.UNPROCESSABLE_ENTITY, code, 'Custom fields do not match the rewards account’s fields; see details.', details);
}
