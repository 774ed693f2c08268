import * as path from 'node:path';
import { DEFAULT_RETRY_SCHEDULE_MS } from '../tenant-webhooks/webhook-events';

/**
 * The gateway's configuration. The environment is read and validated once (`readSettings`: every problem in one
 * message), completed with what only the starting process knows (`resolveConfig`: the embedded database's URL, the
 * local secrets generated into DATA_DIR), and deep-frozen. Modules inject the slice they use (config.module.ts).
 * Every variable is documented in `.env.example` and docs/configuration.md.
 */
export type RewardsEnvironment = 'sandbox' | 'production';
export const REWARDS_ENVIRONMENTS: readonly RewardsEnvironment[] = ['sandbox', 'production'];

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * How orders go upstream: `single` (the current service: one `reward` per `POST /orders`, a dispatch of N rewards
 * is N orders) or `array` (the older form: one order with `rewards: [...]`).
 */
export type OrderShape = 'single' | 'array';
export const ORDER_SHAPES: readonly OrderShape[] = ['single', 'array'];

/** Per process: 6 instances × 12 = 72 of a stock Postgres's 100, leaving room for admin tools and migrations. */
export const DEFAULT_MAX_CONNECTIONS = 12;

/** The built-in sandbox's pre-registered developer app. Not a secret: it only opens the local emulator. */
export const EMBEDDED_SANDBOX_CLIENT = {
  clientId: 'rewards-gateway-demo',
  clientSecret: 'sandbox-demo-secret',
};

export interface RewardsEnvironmentConfig {
  readonly name: RewardsEnvironment;
  /** Base URL of the rewards service (no trailing slash); `/oauth/...` and `/api/v2/...` hang below it. */
  readonly baseUrl: string;
  readonly clientId: string;
  /** Secret: never logged, never returned. */
  readonly clientSecret: string;
  /** True when the base URL points at the sandbox mounted inside this process (`/sandbox`). */
  readonly embedded: boolean;
  /** Send PKCE (S256) on the authorization request (RFC 9700 §2.1.1). `REWARDS_<ENV>_PKCE=false` opts out. */
  readonly pkce: boolean;
  readonly orderShape: OrderShape;
  /** Per-account pacing of every upstream call (rewards-api/account-pacer.ts). */
  readonly pacing: PacingConfig;
}

/**
 * The service's limit per account: at most `rps` requests in any 1-second interval (0 = do not pace). `burst`
 * requests may go back to back on an idle account; the spacing is widened so a burst plus the next second's
 * requests still stay within `rps` (see account-pacer.ts).
 */
export interface PacingConfig {
  readonly rps: number;
  readonly burst: number;
}

/** The configured rewards environments (at least one). */
export type RewardsConfig = Readonly<Partial<Record<RewardsEnvironment, RewardsEnvironmentConfig>>>;

export interface VaultKey {
  readonly id: string;
  /** 32 bytes for AES-256-GCM. Secret. */
  readonly key: Buffer;
}

export interface DatabaseConfig {
  readonly url: string;
  /** Connections this process may hold in all (every pool), split by `database/pg-pools`. */
  readonly maxConnections: number;
}

export interface DispatchConfig {
  /** Attempts (the first included) before a dispatch fails for good on transient errors. */
  readonly maxAttempts: number;
  /** First retry delay; doubles per attempt (with jitter) up to `retryMaxMs`; Retry-After wins when longer. */
  readonly retryBaseMs: number;
  /** The longest wait between two attempts (before Retry-After). */
  readonly retryMaxMs: number;
  /** A dispatch in `sending` longer than this (its process died) is claimed again. Must exceed the upstream timeout. */
  readonly leaseMs: number;
  /** How often each instance's worker looks for due dispatches. */
  readonly pollMs: number;
  /** Timeout of the upstream order call. */
  readonly upstreamTimeoutMs: number;
  /** How often an order held for approval upstream is checked again (`GET /orders/{id}`). */
  readonly approvalCheckMs: number;
  /**
   * A send of at most this many rewards is interactive: answered after its orders went out. A larger one is a batch:
   * stored, answered 202 at once, and sent by the workers at the account's pace behind interactive sends.
   */
  readonly inlineMaxRewards: number;
  /**
   * The longest an interactive send waits for its account's pacing slot: when the slot lies further out, the dispatch
   * is stored, answered 202 `queued`, and sent by the workers.
   */
  readonly interactiveMaxWaitMs: number;
  /** The most rewards one dispatch (a batch) may hold. */
  readonly maxRewards: number;
  /**
   * A sent reward (EMAIL / PHONE) whose delivery is still not final this long after it was sent is polled
   * (`GET /rewards/{id}`, at the account's pace) — reconciliation for missed webhooks — and again every
   * `deliveryRecheckMs` until final.
   */
  readonly deliveryReconcileAfterMs: number;
  readonly deliveryRecheckMs: number;
  /** How often each instance's delivery reconciliation (and webhook registration retry) job runs. */
  readonly deliveryReconcilePollMs: number;
  /** Register the gateway's delivery webhook with the service when a connection becomes active. */
  readonly deliveryWebhooksRegister: boolean;
  /** First wait before a failed webhook registration is tried again; doubles per attempt, at most 1 h. */
  readonly deliveryWebhookRetryMs: number;
}

export interface OpsConfig {
  /** Where connection alerts (broken / recovered) are POSTed; unset: alerts are only logged. */
  readonly webhookUrl?: string;
  /** HMAC-SHA256 key signing each alert (set whenever `webhookUrl` is). Secret. */
  readonly webhookSecret?: string;
  /** A connection unused this long is `idle` and probed in the background. */
  readonly idleAfterMs: number;
  /** How often each instance looks for connections to probe (0 disables the background probe). */
  readonly probeIntervalMs: number;
}

/** Tenant webhooks: signed event deliveries from the durable outbox (`webhook_outbox`). */
export interface TenantWebhooksConfig {
  /**
   * Deliver to loopback / private / link-local / CGNAT / multicast addresses too. Off by default; on by default only
   * for a demo gateway (the built-in sandbox mounted, no production environment), where receivers run locally.
   */
  readonly allowPrivateTargets: boolean;
  /** How often each instance looks for due deliveries. */
  readonly pollMs: number;
  /** Waits after each failed attempt (the last one repeats). */
  readonly retryScheduleMs: readonly number[];
  /** An event still not delivered this long after it was queued is `failed`. */
  readonly giveUpAfterMs: number;
  /** An endpoint failing continuously (no success) this long is disabled. */
  readonly disableAfterMs: number;
  /** Timeout of one delivery (connect, answer and the capped body read). */
  readonly timeoutMs: number;
  /**
   * A claim's lease beyond the delivery's own timeout: a row claimed by a process that died is due again this long
   * after its timeout would have ended.
   */
  readonly leaseMarginMs: number;
  /** Deliveries in flight per instance (at most 4 per endpoint). */
  readonly concurrency: number;
}

/** Access tokens (token-vault/access-token.provider.ts). */
export interface TokensConfig {
  /** How long a caller waits for another instance's refresh lock before `refresh_lock_timeout`. */
  readonly refreshLockTimeoutMs: number;
  /** After `invalid_client`, each instance asks the token endpoint again at most this often per environment. */
  readonly appCredentialsRetryMs: number;
}

/** The audit trail (`audit_events`). */
export interface AuditConfig {
  /** Records older than this many days are deleted by the retention job (`AuditStore.purgeOlderThan`); never earlier. */
  readonly retentionDays: number;
}

/**
 * Retention (src/retention/retention.ts): what is kept how long, and how the job that removes the rest paces itself.
 * A period of 0 keeps that data forever.
 */
export interface RetentionConfig {
  /** Settled dispatches and their rewards older than this many days are deleted. */
  readonly dispatchDays: number;
  /** Recipients' personal data of settled dispatches older than this many days is redacted. */
  readonly recipientDataDays: number;
  /** How often an instance tries a pass (one instance at a time runs it). */
  readonly intervalMs: number;
  /** Rows per statement. */
  readonly batchSize: number;
  /** Pause between two batches, so that a large purge leaves room for the send path. */
  readonly pauseMs: number;
}

/**
 * OpenTelemetry tracing (common/tracing.ts): on when an OTLP endpoint is set. The SDK reads its other standard variables
 * itself (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER, OTEL_BSP_*, …).
 */
export interface TracingConfig {
  /** OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL; the official exporters' default. */
  readonly protocol: OtlpProtocol;
}
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** The connection activity (`connection_activity`): a record of every upstream request made for a connection. */
export interface ActivityConfig {
  /** Record upstream requests (off: nothing is buffered or written; the listings show what was kept). */
  readonly enabled: boolean;
  /** Records older than this many days are deleted by the retention job (`ActivityStore.purgeOlderThan`). */
  readonly retentionDays: number;
}

/** The resolved configuration: complete, validated, deep-frozen. Each top-level key is an injectable slice. */
export interface AppConfig {
  readonly port: number;
  readonly publicBaseUrl: string;
  readonly logLevel: LogLevel;
  /** Local state of the embedded default: database files, generated secrets. */
  readonly dataDir: string;
  readonly database: DatabaseConfig;
  /** Secret. OPERATOR_API_KEY, or generated once into `$DATA_DIR`. */
  readonly operatorApiKey: string;
  /** Secret. The first key encrypts, all decrypt. VAULT_KEYS, or generated once into `$DATA_DIR` (embedded only). */
  readonly vaultKeys: readonly VaultKey[];
  readonly rewards: RewardsConfig;
  readonly defaultEnvironment: RewardsEnvironment;
  /** Mount the rewards-service emulator in this process under `/sandbox`. */
  readonly mountSandbox: boolean;
  /** Enable the sandbox's `/__control` test API (never in production). */
  readonly sandboxControl: boolean;
  /** The mounted sandbox's per-account limit (requests in any 1-second interval; 0 = off), as the service has it. */
  readonly sandboxRateLimitRps: number;
  readonly dispatch: DispatchConfig;
  readonly ops: OpsConfig;
  readonly webhooks: TenantWebhooksConfig;
  readonly tokens: TokensConfig;
  readonly audit: AuditConfig;
  readonly retention: RetentionConfig;
  /** Null: tracing off (no SDK loaded, only the no-op API). */
  readonly tracing: TracingConfig | null;
  readonly activity: ActivityConfig;
}

/**
 * What the environment says, validated. The values the starting process may still have to provide are open: the
 * database URL (unset: the embedded database), the operator key and the vault keys (unset: generated into DATA_DIR).
 */
export interface Settings extends Omit<AppConfig, 'database' | 'operatorApiKey' | 'vaultKeys'> {
  readonly database: { readonly url?: string; readonly maxConnections: number };
  readonly operatorApiKey?: string;
  readonly vaultKeys?: readonly VaultKey[];
  /** The built-in sandbox's app credentials are not configured: the demo values, unless generated ones are given. */
  readonly sandboxClientUnset: boolean;
}

/** What only the starting process knows, for the values the environment left open. */
export interface RuntimeFacts {
  /** The embedded database's URL. */
  databaseUrl?: string;
  operatorApiKey?: string;
  vaultKeys?: readonly VaultKey[];
  /** The built-in sandbox's app credentials, generated per DATA_DIR. */
  sandboxClient?: { clientId: string; clientSecret: string };
}

export class ConfigValidationError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigValidationError';
  }
}

type Env = Record<string, string | undefined>;

/** Reads the environment: an unset or blank variable takes its default; every problem is collected. */
export function readSettings(env: Env, cwd = process.cwd()): Settings {
  const { raw, read, problems } = reader(env);

  const port = read('PORT', 3000, int(0, 65535));
  const publicBaseUrl = read('PUBLIC_BASE_URL', `http://localhost:${port}`, httpUrl);
  const databaseUrl = read('DATABASE_URL', undefined, postgresUrl);
  // DATABASE_POOL_SIZE (older name) is read when DATABASE_MAX_CONNECTIONS is not set.
  const budgetVar =
    raw('DATABASE_MAX_CONNECTIONS') === undefined && raw('DATABASE_POOL_SIZE') !== undefined
      ? 'DATABASE_POOL_SIZE'
      : 'DATABASE_MAX_CONNECTIONS';
  const maxConnections = read(budgetVar, DEFAULT_MAX_CONNECTIONS, int(5, 500));
  const operatorApiKey = read('OPERATOR_API_KEY', undefined, (v) =>
    v.length >= 24 ? v : invalid('must be at least 24 characters long'),
  );
  const vaultKeys = read('VAULT_KEYS', undefined, parseVaultKeys);
  if (raw('VAULT_KEYS') === undefined && raw('DATABASE_URL') !== undefined) {
    problems.push(
      'VAULT_KEYS is required when DATABASE_URL is set (the generated key of the embedded default lives in ' +
        'DATA_DIR, which replicas do not share); generate one with `npm run cli -- vault:generate-key`',
    );
  }

  // The built-in sandbox is mounted only when a sandbox environment uses it — no sandbox host configured and not a
  // production-only gateway — or when asked for with SANDBOX_ENABLED=true (SANDBOX_ENABLED=false: never).
  const sandboxHost = raw('REWARDS_SANDBOX_BASE_URL') !== undefined;
  const productionOnly = !sandboxHost && raw('REWARDS_PRODUCTION_BASE_URL') !== undefined;
  const mountSandbox = read('SANDBOX_ENABLED', !productionOnly, bool) && !sandboxHost;
  const environment = (name: RewardsEnvironment, baseUrl?: string): RewardsEnvironmentConfig => {
    const v = (suffix: string) => `REWARDS_${name.toUpperCase()}_${suffix}`;
    const rps = read(v('RATE_LIMIT_RPS'), 10, int(0, 10_000));
    const burst = read(v('RATE_LIMIT_BURST'), 1, int(1, 10_000));
    if (rps > 0 && burst >= rps)
      problems.push(
        `${v('RATE_LIMIT_BURST')} must be below ${v('RATE_LIMIT_RPS')} (a burst of ${burst} plus the next second's requests would exceed ${rps} per second)`,
      );
    if (baseUrl === undefined)
      for (const credential of [v('CLIENT_ID'), v('CLIENT_SECRET')])
        if (raw(credential) === undefined)
          problems.push(`${credential} is required when ${v('BASE_URL')} is set`);
    return {
      name,
      baseUrl: baseUrl ?? read(v('BASE_URL'), '', httpUrl),
      clientId: raw(v('CLIENT_ID')) ?? (baseUrl ? EMBEDDED_SANDBOX_CLIENT.clientId : ''),
      clientSecret: raw(v('CLIENT_SECRET')) ?? (baseUrl ? EMBEDDED_SANDBOX_CLIENT.clientSecret : ''),
      embedded: baseUrl !== undefined,
      pkce: read(v('PKCE'), true, bool),
      orderShape: read(v('ORDER_SHAPE'), 'single', oneOf(ORDER_SHAPES)),
      pacing: { rps, burst },
    };
  };
  const rewards: { -readonly [E in RewardsEnvironment]?: RewardsEnvironmentConfig } = {};
  if (mountSandbox) rewards.sandbox = environment('sandbox', `${publicBaseUrl}/sandbox`);
  else if (sandboxHost) rewards.sandbox = environment('sandbox');
  if (raw('REWARDS_PRODUCTION_BASE_URL') !== undefined) rewards.production = environment('production');
  else if (raw('REWARDS_PRODUCTION_CLIENT_ID') || raw('REWARDS_PRODUCTION_CLIENT_SECRET'))
    problems.push('REWARDS_PRODUCTION_CLIENT_ID/SECRET are set but REWARDS_PRODUCTION_BASE_URL is not');
  if (!rewards.sandbox && !rewards.production) {
    problems.push(
      'no rewards environment is configured: set REWARDS_SANDBOX_BASE_URL or REWARDS_PRODUCTION_BASE_URL, or leave SANDBOX_ENABLED unset for the built-in sandbox',
    );
  }
  const defaultEnvironment = read(
    'REWARDS_DEFAULT_ENVIRONMENT',
    rewards.production ? 'production' : 'sandbox',
    oneOf(REWARDS_ENVIRONMENTS),
  );
  if (!rewards[defaultEnvironment])
    problems.push(
      `REWARDS_DEFAULT_ENVIRONMENT is ${defaultEnvironment} but that environment is not configured`,
    );

  const dispatch: DispatchConfig = {
    maxAttempts: read('DISPATCH_MAX_ATTEMPTS', 10, int(1, 100)),
    retryBaseMs: read('DISPATCH_RETRY_BASE_MS', 2_000, int(10, 600_000)),
    retryMaxMs: read('DISPATCH_RETRY_MAX_MS', 300_000, int(100, 3_600_000)),
    leaseMs: read('DISPATCH_LEASE_MS', 60_000, int(1_000, 3_600_000)),
    pollMs: read('DISPATCH_POLL_MS', 1_000, int(50, 60_000)),
    upstreamTimeoutMs: read('DISPATCH_UPSTREAM_TIMEOUT_MS', 15_000, int(100, 120_000)),
    approvalCheckMs: read('DISPATCH_APPROVAL_CHECK_MS', 60_000, int(50, DAY)),
    inlineMaxRewards: read('DISPATCH_INLINE_MAX_REWARDS', 10, int(1, 100)),
    interactiveMaxWaitMs: read('DISPATCH_INTERACTIVE_MAX_WAIT_MS', 5_000, int(0, 600_000)),
    maxRewards: read('DISPATCH_MAX_REWARDS', 10_000, int(1, 10_000)),
    deliveryReconcileAfterMs: read('DELIVERY_RECONCILE_AFTER_MS', 15 * MINUTE, int(100, 7 * DAY)),
    deliveryRecheckMs: read('DELIVERY_RECHECK_MS', 60 * MINUTE, int(100, 7 * DAY)),
    deliveryReconcilePollMs: read('DELIVERY_RECONCILE_POLL_MS', 30_000, int(50, DAY)),
    deliveryWebhooksRegister: read('DELIVERY_WEBHOOKS_REGISTER', true, bool),
    deliveryWebhookRetryMs: read('DELIVERY_WEBHOOK_RETRY_MS', 60_000, int(50, 3_600_000)),
  };
  if (dispatch.retryMaxMs < dispatch.retryBaseMs)
    problems.push('DISPATCH_RETRY_MAX_MS must not be below DISPATCH_RETRY_BASE_MS');
  if (dispatch.leaseMs <= dispatch.upstreamTimeoutMs)
    problems.push(
      'DISPATCH_LEASE_MS must be longer than DISPATCH_UPSTREAM_TIMEOUT_MS (a live send must not look dead)',
    );

  const ops: OpsConfig = {
    webhookUrl: read('OPS_WEBHOOK_URL', undefined, httpUrl),
    webhookSecret: raw('OPS_WEBHOOK_SECRET'),
    idleAfterMs: read('OPS_IDLE_AFTER_MS', 6 * 60 * MINUTE, int(1_000, 365 * DAY)),
    probeIntervalMs: read('OPS_PROBE_INTERVAL_MS', 60_000, int(0, DAY)),
  };
  if (raw('OPS_WEBHOOK_URL') !== undefined && (ops.webhookSecret ?? '').length < 16)
    problems.push('OPS_WEBHOOK_SECRET (at least 16 characters) is required when OPS_WEBHOOK_URL is set');

  const webhooks: TenantWebhooksConfig = {
    // Default on only for a demo gateway: the built-in sandbox mounted and no production environment.
    allowPrivateTargets: read('WEBHOOK_ALLOW_PRIVATE_TARGETS', mountSandbox && !rewards.production, bool),
    pollMs: read('WEBHOOK_POLL_MS', 1_000, int(20, 60_000)),
    retryScheduleMs: read('WEBHOOK_RETRY_SCHEDULE_MS', [...DEFAULT_RETRY_SCHEDULE_MS], (v) => {
      const waits = v.split(',').map((w) => Number(w.trim()));
      return waits.every((w) => Number.isInteger(w) && w >= 10 && w <= 7 * DAY)
        ? waits
        : invalid(`must be a comma-separated list of waits in ms, each from 10 to ${7 * DAY} (got "${v}")`);
    }),
    giveUpAfterMs: read('WEBHOOK_GIVE_UP_AFTER_MS', 3 * DAY, int(100, 30 * DAY)),
    disableAfterMs: read('WEBHOOK_DISABLE_AFTER_MS', 5 * DAY, int(100, 90 * DAY)),
    timeoutMs: read('WEBHOOK_TIMEOUT_MS', 10_000, int(100, 60_000)),
    leaseMarginMs: read('WEBHOOK_LEASE_MARGIN_MS', 20_000, int(100, 3_600_000)),
    concurrency: read('WEBHOOK_CONCURRENCY', 16, int(1, 256)),
  };

  const settings: Settings = {
    port,
    publicBaseUrl,
    logLevel: read('LOG_LEVEL', 'info', oneOf(LOG_LEVELS)),
    dataDir: path.resolve(cwd, raw('DATA_DIR') ?? './.data'),
    database: { url: databaseUrl, maxConnections },
    operatorApiKey,
    vaultKeys,
    rewards,
    defaultEnvironment,
    mountSandbox,
    sandboxClientUnset:
      mountSandbox &&
      raw('REWARDS_SANDBOX_CLIENT_ID') === undefined &&
      raw('REWARDS_SANDBOX_CLIENT_SECRET') === undefined,
    sandboxControl: read('SANDBOX_CONTROL_ENABLED', false, bool),
    sandboxRateLimitRps: read('SANDBOX_RATE_LIMIT_RPS', 10, int(0, 100_000)),
    dispatch,
    ops,
    webhooks,
    tokens: {
      refreshLockTimeoutMs: read('TOKEN_REFRESH_LOCK_TIMEOUT_MS', 5_000, int(100, 60_000)),
      appCredentialsRetryMs: read('TOKEN_APP_CREDENTIALS_RETRY_MS', 10_000, int(100, 3_600_000)),
    },
    audit: { retentionDays: read('AUDIT_RETENTION_DAYS', 400, int(1, 3650)) },
    retention: {
      dispatchDays: read('DISPATCH_RETENTION_DAYS', 400, int(0, 36500)),
      recipientDataDays: read('RECIPIENT_DATA_RETENTION_DAYS', 90, int(0, 36500)),
      intervalMs: read('RETENTION_INTERVAL_MS', 10 * MINUTE, int(1_000, DAY)),
      batchSize: read('RETENTION_BATCH_SIZE', 1_000, int(1, 100_000)),
      pauseMs: read('RETENTION_PAUSE_MS', 50, int(0, 60_000)),
    },
    tracing: readTracing(read, raw),
    activity: {
      enabled: read('CONNECTION_ACTIVITY_ENABLED', true, bool),
      retentionDays: read('CONNECTION_ACTIVITY_RETENTION_DAYS', 30, int(1, 3650)),
    },
  };
  if (problems.length > 0) throw new ConfigValidationError(problems);
  return settings;
}

/** The settings completed with the runtime facts, checked complete, and frozen: what every module sees. */
export function resolveConfig(settings: Settings, facts: RuntimeFacts = {}): AppConfig {
  const { sandboxClientUnset: _, database, operatorApiKey, vaultKeys, rewards, ...rest } = settings;
  const missing: string[] = [];
  const given = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) missing.push(`${name} is not set, and the starting process provided none`);
    return value as T;
  };
  const config: AppConfig = {
    ...rest,
    database: {
      url: given(database.url ?? facts.databaseUrl, 'DATABASE_URL'),
      maxConnections: database.maxConnections,
    },
    operatorApiKey: given(operatorApiKey ?? facts.operatorApiKey, 'OPERATOR_API_KEY'),
    vaultKeys: given(vaultKeys ?? facts.vaultKeys, 'VAULT_KEYS'),
    rewards:
      rewards.sandbox && facts.sandboxClient
        ? { ...rewards, sandbox: { ...rewards.sandbox, ...facts.sandboxClient } }
        : rewards,
  };
  if (missing.length > 0) throw new ConfigValidationError(missing);
  return deepFreeze(config);
}

/** The configuration of an environment that sets everything itself (tests, worker processes). */
export function parseConfig(env: Env, cwd?: string): AppConfig {
  return resolveConfig(readSettings(env, cwd));
}

/** `VAULT_KEYS=k2:<base64 32 bytes>,k1:<base64 32 bytes>` — the first encrypts, all decrypt. */
export function parseVaultKeys(raw: string): VaultKey[] {
  const keys: VaultKey[] = [];
  const problems: string[] = [];
  for (const [index, entry] of raw
    .split(',')
    .map((e) => e.trim())
    .entries()) {
    const sep = entry.indexOf(':');
    const id = sep > 0 ? entry.slice(0, sep) : '';
    const key = Buffer.from(entry.slice(sep + 1), 'base64');
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id))
      problems.push(`entry ${index + 1} must look like <id>:<base64 key> with an id of [A-Za-z0-9_-]{1,32}`);
    else if (key.length !== 32)
      problems.push(`key "${id}" must be 32 bytes, base64-encoded (got ${key.length} bytes)`);
    else if (keys.some((k) => k.id === id)) problems.push(`key id "${id}" appears twice`);
    else keys.push({ id, key });
  }
  return problems.length ? invalid(...problems) : keys;
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/** A value a parser refuses: the reasons complete "<VARIABLE> …". Never the value itself when it is a secret. */
class Invalid extends Error {
  constructor(readonly reasons: string[]) {
    super(reasons.join('; '));
  }
}
function invalid(...reasons: string[]): never {
  throw new Invalid(reasons);
}

function reader(env: Env) {
  const problems: string[] = [];
  const raw = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  /** The variable parsed, or `fallback` when unset (and, with a problem noted, when invalid). */
  const read = <T, F = T>(name: string, fallback: F, parse: (value: string) => T): T | F => {
    const value = raw(name);
    if (value === undefined) return fallback;
    try {
      return parse(value);
    } catch (error) {
      if (!(error instanceof Invalid)) throw error;
      problems.push(...error.reasons.map((reason) => `${name} ${reason}`));
      return fallback;
    }
  };
  return { raw, read, problems };
}

/** Tracing is on with an OTLP endpoint, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. */
function readTracing(
  read: ReturnType<typeof reader>['read'],
  raw: ReturnType<typeof reader>['raw'],
): TracingConfig | null {
  const endpoint =
    read('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', undefined, otlpEndpoint) ??
    read('OTEL_EXPORTER_OTLP_ENDPOINT', undefined, otlpEndpoint);
  const exporter = read('OTEL_TRACES_EXPORTER', 'otlp', oneOf(['otlp', 'none']));
  const protocolVar =
    raw('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') !== undefined
      ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = read(protocolVar, 'http/protobuf' as OtlpProtocol, (v) =>
    v.toLowerCase() === 'grpc'
      ? invalid('grpc is not supported here: use http/protobuf (the default) or http/json')
      : oneOf(OTLP_PROTOCOLS)(v),
  );
  if (!endpoint || exporter === 'none' || raw('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
  return { protocol };
}

/** An OTLP/HTTP endpoint: http(s), kept as given (the exporter reads the variable itself). */
function otlpEndpoint(v: string): string {
  try {
    const url = new URL(v);
    if (url.protocol === 'http:' || url.protocol === 'https:') return v;
  } catch {
    // reported below
  }
  return invalid(`must be an absolute http(s) URL (got "${v}")`);
}

const int = (min: number, max: number) => (v: string) =>
  /^\d+$/.test(v) && Number(v) >= min && Number(v) <= max
    ? Number(v)
    : invalid(`must be a whole number from ${min} to ${max} (got "${v}")`);

function bool(v: string): boolean {
  const value = v.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(value)) return true;
  if (['0', 'false', 'no', 'off'].includes(value)) return false;
  return invalid(`must be true or false (got "${v}")`);
}

const oneOf =
  <T extends string>(values: readonly T[]) =>
  (v: string): T =>
    values.includes(v.toLowerCase() as T)
      ? (v.toLowerCase() as T)
      : invalid(`must be one of ${values.join(', ')} (got "${v}")`);

function httpUrl(v: string): string {
  try {
    const url = new URL(v);
    if ((url.protocol === 'http:' || url.protocol === 'https:') && !url.search && !url.hash)
      return url.toString().replace(/\/+$/, '');
  } catch {
    // reported below
  }
  return invalid(`must be an absolute http(s) URL without query or fragment (got "${v}")`);
}

/** Never echoed: the URL may hold a password. */
const postgresUrl = (v: string) =>
  /^postgres(ql)?:\/\/.+/.test(v) ? v : invalid('must be a postgres:// or postgresql:// connection URL');

/** Freezes a value and everything it holds (buffers excepted: a typed array cannot be frozen). */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !ArrayBuffer.isView(value) && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
