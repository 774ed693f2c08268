/** What a tenant key may be allowed to do; a key holds a subset (all of them unless its creator chose). */
export const API_KEY_SCOPES = [
  'rewards:send',
  'rewards:read',
  'connection:manage',
  'webhooks:manage',
] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];
export const isApiKeyScope = (scope: unknown): scope is ApiKeyScope =>
  (API_KEY_SCOPES as readonly unknown[]).includes(scope);

/**
 * Who is calling: an operator (every tenant, the ops API and every scope) or one tenant's service, with its key's
 * scopes. `keyId` null: the operator key of the configuration (OPERATOR_API_KEY), which is stored nowhere.
 */
export type Principal =
  | { kind: 'operator'; keyId: string | null; name: string | null }
  | { kind: 'tenant'; tenantId: string; keyId: string; name: string; scopes: readonly ApiKeyScope[] };

export const PUBLIC_ROUTE = 'rg:public';
export const OPERATOR_ONLY = 'rg:operator-only';
export const BASIC_AUTH_ALLOWED = 'rg:basic-auth-allowed';
/** The scopes a route accepts (any one of them suffices); a route that declares none is for operators only. */
export const REQUIRED_SCOPES = 'rg:required-scopes';
