import { readFileSync, readdirSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { CONNECTION_ERROR_CODES } from '../connections/connections.errors';
import { DELIVERY_WEBHOOK_ERROR_CODES } from '../delivery-webhooks/delivery-webhooks.errors';
import { FIELDS_ERROR_CODES } from '../fields-cache/fields-cache.errors';
import { OPS_ERROR_CODES } from '../ops/ops.errors';
import { DISPATCH_ERROR_CODES } from '../reward-dispatch/reward-dispatch.errors';
import { UPSTREAM_ERROR_CODES } from '../rewards-api/rewards-api.errors';
import { TENANT_WEBHOOK_ERROR_CODES } from '../tenant-webhooks/tenant-webhooks.errors';
import { TENANT_ERROR_CODES } from '../tenants/tenants.errors';
import { TOKEN_VAULT_ERROR_CODES } from '../token-vault/token-vault.errors';
import { COMMON_ERROR_CODES } from './app-error';

const MODULES: Record<string, readonly string[]> = {
  common: COMMON_ERROR_CODES,
  tenants: TENANT_ERROR_CODES,
  connections: CONNECTION_ERROR_CODES,
  'token-vault': TOKEN_VAULT_ERROR_CODES,
  'rewards-api': UPSTREAM_ERROR_CODES,
  'fields-cache': FIELDS_ERROR_CODES,
  'reward-dispatch': DISPATCH_ERROR_CODES,
  ops: OPS_ERROR_CODES,
  'tenant-webhooks': TENANT_WEBHOOK_ERROR_CODES,
  'delivery-webhooks': DELIVERY_WEBHOOK_ERROR_CODES,
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory()
      ? sources(full)
      : full.endsWith('.ts') && !full.endsWith('.spec.ts')
        ? [full]
        : [];
  });
}

describe('error codes', () => {
  it('are declared once each, in one module’s list', () => {
    const seen = new Map<string, string>();
    for (const [module, codes] of Object.entries(MODULES)) {
      for (const code of codes) {
        expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
        expect({ code, declaredIn: seen.get(code) ?? module }).toEqual({ code, declaredIn: module });
        seen.set(code, module);
      }
    }
  });

  it('are thrown only through a module’s error class (AppError subclasses live in *.errors.ts)', () => {
    const root = path.join(__dirname, '..');
    const offenders = sources(root)
      .filter((file) => !file.endsWith('.errors.ts') && !file.endsWith(`common${path.sep}app-error.ts`))
      .filter((file) => /extends AppError\b|new AppError\(/.test(readFileSync(file, 'utf8')))
      .map((file) => path.relative(root, file));
    expect(offenders).toEqual([]);
  });

  it('are each listed in the error table of docs/api.md under their module, and the table lists no other', () => {
    const api = readFileSync(path.join(__dirname, '..', '..', 'docs', 'api.md'), 'utf8');
    const section = api.slice(api.indexOf('\n## Error codes\n'));
    expect(section.length).toBeGreaterThan(100);
    const listed = new Map<string, string[]>();
    for (const [, module, codes] of section.matchAll(/^\| ([a-z-]+) \| ([^|]+) \|/gm)) {
      if (module === 'module') continue; // the header
      listed.set(module, [
        ...(listed.get(module) ?? []),
        ...[...codes.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]),
      ]);
    }
    for (const [module, codes] of Object.entries(MODULES)) {
      expect({ module, missing: codes.filter((c) => !listed.get(module)?.includes(c)) }).toEqual({
        module,
        missing: [],
      });
    }
    const declared = new Set(Object.values(MODULES).flat());
    expect([...listed.values()].flat().filter((code) => !declared.has(code))).toEqual([]);
  });
});
