/**
 * What the audit trail records: every change made through the API, the dashboard or the CLI. Names are
 * `<target>.<past tense>`; the list is the filter `action` accepts, and docs/api.md lists each with its target.
 * Not recorded: sends (each dispatch is its own record), reads, probes (`…/check`: a connection's health, kept in its
 * events) and a fields-cache purge (a cached copy, reloaded on next use).
 */
export const AUDIT_ACTIONS = [
  'tenant.created',
  'tenant.updated',
  'tenant.deleted',
  'api_key.created',
  'api_key.revoked',
  'api_key.rotated',
  'connect_session.created',
  'connection.connected',
  'connection.reconsented',
  'connection.reconsent_refused',
  'connection.disconnected',
  'connection.refreshed',
  'webhook_endpoint.created',
  'webhook_endpoint.enabled',
  'webhook_endpoint.deleted',
  'webhook_event.replayed',
  'dispatch.cancelled',
  'vault.key_rotated',
  'recipient.erased',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** What a record is about (with its id, when it has one). */
export type AuditTargetType =
  | 'tenant'
  | 'api_key'
  | 'connect_session'
  | 'connection'
  | 'webhook_endpoint'
  | 'webhook_event'
  | 'dispatch'
  | 'vault'
  | 'recipient';

/**
 * Who made the change:
 * - `api_key`: a tenant's key (id and name);
 * - `operator_key`: an operator key stored in the database (id and name, `npm run cli -- operator-key:create`);
 * - `operator_env_key`: the operator key of the configuration (OPERATOR_API_KEY; stored nowhere, so no id);
 * - `cli`: a command run on a gateway's host (`npm run cli -- …`);
 * - `connect_link`: the tenant's admin in a browser, through a connect link (id: the connect session);
 * - `system`: the gateway itself (a change with no caller; not expected from the API).
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

/** Through what the change came: the HTTP API, the ops dashboard (Basic auth), the CLI, the hosted connect flow. */
export type AuditVia = 'api' | 'dashboard' | 'cli' | 'connect' | 'internal';

export interface AuditActor {
  type: AuditActorType;
  /** A key id, or the connect session id for `connect_link`. */
  id: string | null;
  /** A key's name. */
  name: string | null;
  via: AuditVia;
}

export const CLI_ACTOR: AuditActor = { type: 'cli', id: null, name: null, via: 'cli' };
export const SYSTEM_ACTOR: AuditActor = { type: 'system', id: null, name: null, via: 'internal' };
