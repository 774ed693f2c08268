/** Who is calling: an operator (every tenant and the ops API) or one tenant's service. */
export type Principal =
  { kind: 'operator'; keyId: string | null } | { kind: 'tenant'; tenantId: string; keyId: string };

export const PUBLIC_ROUTE = 'rg:public';
export const OPERATOR_ONLY = 'rg:operator-only';
export const BASIC_AUTH_ALLOWED = 'rg:basic-auth-allowed';
