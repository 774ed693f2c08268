/**
 * Every change made through the API, the dashboard or the CLI, as `<target>.<past tense>`. Not recorded: sends (each
 * dispatch is its own record), reads, probes and fields-cache purges.
 */
const CHANGES = {
  tenant: ['created', 'updated', 'deleted'],
  api_key: ['created', 'revoked', 'rotated'],
  connect_session: ['created'],
  connection: ['connected', 'reconsented', 'reconsent_refused', 'disconnected', 'refreshed'],
  webhook_endpoint: ['created', 'enabled', 'deleted'],
  webhook_event: ['replayed'],
  dispatch: ['cancelled'],
  vault: ['key_rotated'],
  recipient: ['erased'],
} as const;

/** What a record is about: its action's prefix. */
export type AuditTargetType = keyof typeof CHANGES;
export type AuditAction = { [T in AuditTargetType]: `${T}.${(typeof CHANGES)[T][number]}` }[AuditTargetType];
export const AUDIT_ACTIONS = Object.entries(CHANGES).flatMap(([target, changes]) =>
  changes.map((change) => `${target}.${change}`),
) as readonly AuditAction[];

/**
 * Who made the change: a tenant's key, an operator key stored in the database, OPERATOR_API_KEY (no id), the CLI, the
 * tenant's admin through a connect link (id: the connect session), or the gateway itself.
 */
export const AUDIT_ACTOR_TYPES = [
  'api_key',
  'operator_key',
  'operator_env_key',
  'cli',
  'connect_link',
  'system',
] as const;
export type AuditActorType = (typeof AUDIT_ACTOR_TYPES)[number];

export const AUDIT_VIAS = ['api', 'dashboard', 'cli', 'connect', 'internal'] as const;
export type AuditVia = (typeof AUDIT_VIAS)[number];

export interface AuditActor {
  type: AuditActorType;
  /** A key id, or the connect session id. */
  id: string | null;
  name: string | null;
  via: AuditVia;
}

export const CLI_ACTOR: AuditActor = { type: 'cli', id: null, name: null, via: 'cli' };
export const SYSTEM_ACTOR: AuditActor = { type: 'system', id: null, name: null, via: 'internal' };
