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
/** `single`: one `reward` per `POST /orders`; `array`: the older form, one order with `rewards: [...]`. */
export type OrderShape = 'single' | 'array';
const ORDER_SHAPES: readonly OrderShape[] = ['single', 'array'];
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** The built-in sandbox's pre-registered developer app. Not a secret: it only opens the local emulator. */
export const EMBEDDED_SANDBOX_CLIENT = {
  clientId: 'rewards-gateway-demo',
  clientSecret: 'sandbox-demo-secret',
};

export interface RewardsEnvironmentConfig {
  readonly name: RewardsEnvironment;
  /** Base URL of the rewards service (no trailing slash). */
  readonly baseUrl: string;
  readonly clientId: string;
  /** Secret: never logged, never returned. */
  readonly clientSecret: string;
  /** The base URL points at the sandbox mounted in this process (`/sandbox`). */
  readonly embedded: boolean;
  readonly pkce: boolean;
  readonly orderShape: OrderShape;
  readonly pacing: PacingConfig;
}

/** At most `rps` requests in any second per account (0: not paced), `burst` back to back (rewards-api/account-pacer.ts). */
export interface PacingConfig {
  readonly rps: number;
  readonly burst: number;
}

export type RewardsConfig = Readonly<Partial<Record<RewardsEnvironment, RewardsEnvironmentConfig>>>;

export interface VaultKey {
  readonly id: string;
  /** 32 bytes for AES-256-GCM. Secret. */
  readonly key: Buffer;
}

export interface DatabaseConfig {
  readonly url: string;
  /** Connections this process may hold in all pools together (database/pg-pools.ts). */
  readonly maxConnections: number;
}

/** OTLP tracing (common/tracing.ts); the SDK reads its other standard OTEL_* variables itself. */
export interface TracingConfig {
  readonly protocol: OtlpProtocol;
}

/** One environment variable: an unset or blank one takes `fallback`. */
type Var<T> = { readonly name: string; readonly fallback: T; readonly parse: (value: string) => T };
type Slice<S> = { readonly [K in keyof S]: S[K] extends Var<infer T> ? T : never };

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/**
 * The variables that map one to one onto a setting, by slice. `demo`: the built-in sandbox is mounted and there is
 * no production environment (receivers of tenant webhooks then run locally).
 */
const table = (demo: boolean) => ({
  dispatch: {
    /** Attempts (the first included) before a dispatch fails for good on transient errors. */
    maxAttempts: int('DISPATCH_MAX_ATTEMPTS', 10, 1, 100),
    /** First retry delay; doubles per attempt (with jitter) up to `retryMaxMs`; a longer Retry-After wins. */
    retryBaseMs: int('DISPATCH_RETRY_BASE_MS', 2_000, 10, 600_000),
    retryMaxMs: int('DISPATCH_RETRY_MAX_MS', 300_000, 100, 3_600_000),
    /** A dispatch in `sending` longer than this (its process died) is claimed again. */
    leaseMs: int('DISPATCH_LEASE_MS', 60_000, 1_000, 3_600_000),
    pollMs: int('DISPATCH_POLL_MS', 1_000, 50, 60_000),
    upstreamTimeoutMs: int('DISPATCH_UPSTREAM_TIMEOUT_MS', 15_000, 100, 120_000),
    /** How often an order held for approval upstream is checked again. */
    approvalCheckMs: int('DISPATCH_APPROVAL_CHECK_MS', 60_000, 50, DAY),
    /** A send of at most this many rewards is interactive (answered after its orders went out); larger: a batch. */
    inlineMaxRewards: int('DISPATCH_INLINE_MAX_REWARDS', 10, 1, 100),
    /** An interactive send whose pacing slot lies further out is stored and answered 202 `queued`. */
    interactiveMaxWaitMs: int('DISPATCH_INTERACTIVE_MAX_WAIT_MS', 5_000, 0, 600_000),
    maxRewards: int('DISPATCH_MAX_REWARDS', 10_000, 1, 10_000),
    /** A sent reward still not final this long after it was sent is polled, then every `deliveryRecheckMs`. */
    deliveryReconcileAfterMs: int('DELIVERY_RECONCILE_AFTER_MS', 15 * MINUTE, 100, 7 * DAY),
    deliveryRecheckMs: int('DELIVERY_RECHECK_MS', 60 * MINUTE, 100, 7 * DAY),
    deliveryReconcilePollMs: int('DELIVERY_RECONCILE_POLL_MS', 30_000, 50, DAY),
    deliveryWebhooksRegister: flag('DELIVERY_WEBHOOKS_REGISTER', true),
    /** First wait before a failed webhook registration is retried; doubles per attempt, at most 1 h. */
    deliveryWebhookRetryMs: int('DELIVERY_WEBHOOK_RETRY_MS', 60_000, 50, 3_600_000),
  },
  ops: {
    /** Where connection alerts are POSTed; unset: alerts are only logged. */
    webhookUrl: v<string | undefined>('OPS_WEBHOOK_URL', undefined, httpUrl),
    /** HMAC-SHA256 key signing each alert. Secret. */
    webhookSecret: v<string | undefined>('OPS_WEBHOOK_SECRET', undefined, (s) => s),
    /** A connection unused this long is `idle` and probed in the background. */
    idleAfterMs: int('OPS_IDLE_AFTER_MS', 6 * 60 * MINUTE, 1_000, 365 * DAY),
    /** 0 disables the background probe. */
    probeIntervalMs: int('OPS_PROBE_INTERVAL_MS', 60_000, 0, DAY),
  },
  webhooks: {
    /** Deliver to loopback / private / link-local / CGNAT / multicast addresses too. */
    allowPrivateTargets: flag('WEBHOOK_ALLOW_PRIVATE_TARGETS', demo),
    pollMs: int('WEBHOOK_POLL_MS', 1_000, 20, 60_000),
    /** Waits after each failed attempt (the last one repeats). */
    retryScheduleMs: v<readonly number[]>('WEBHOOK_RETRY_SCHEDULE_MS', [...DEFAULT_RETRY_SCHEDULE_MS], waits),
    giveUpAfterMs: int('WEBHOOK_GIVE_UP_AFTER_MS', 3 * DAY, 100, 30 * DAY),
    disableAfterMs: int('WEBHOOK_DISABLE_AFTER_MS', 5 * DAY, 100, 90 * DAY),
    timeoutMs: int('WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    /** A claimed row whose process died is due again this long after its delivery's timeout. */
    leaseMarginMs: int('WEBHOOK_LEASE_MARGIN_MS', 20_000, 100, 3_600_000),
    /** Deliveries in flight per instance (at most 4 per endpoint). */
    concurrency: int('WEBHOOK_CONCURRENCY', 16, 1, 256),
  },
  tokens: {
    /** How long a caller waits for another instance's refresh lock before `refresh_lock_timeout`. */
    refreshLockTimeoutMs: int('TOKEN_REFRESH_LOCK_TIMEOUT_MS', 5_000, 100, 60_000),
    /** After `invalid_client`, each instance asks the token endpoint again at most this often per environment. */
    appCredentialsRetryMs: int('TOKEN_APP_CREDENTIALS_RETRY_MS', 10_000, 100, 3_600_000),
  },
  audit: { retentionDays: int('AUDIT_RETENTION_DAYS', 400, 1, 3650) },
  /** Retention (src/retention/retention.ts); a period of 0 keeps that data forever. */
  retention: {
    dispatchDays: int('DISPATCH_RETENTION_DAYS', 400, 0, 36500),
    recipientDataDays: int('RECIPIENT_DATA_RETENTION_DAYS', 90, 0, 36500),
    intervalMs: int('RETENTION_INTERVAL_MS', 10 * MINUTE, 1_000, DAY),
    batchSize: int('RETENTION_BATCH_SIZE', 1_000, 1, 100_000),
    pauseMs: int('RETENTION_PAUSE_MS', 50, 0, 60_000),
  },
  activity: {
    enabled: flag('CONNECTION_ACTIVITY_ENABLED', true),
    retentionDays: int('CONNECTION_ACTIVITY_RETENTION_DAYS', 30, 1, 3650),
  },
});
type Table = ReturnType<typeof table>;
export type DispatchConfig = Slice<Table['dispatch']>;
export type OpsConfig = Slice<Table['ops']>;
export type TenantWebhooksConfig = Slice<Table['webhooks']>;
export type TokensConfig = Slice<Table['tokens']>;
export type AuditConfig = Slice<Table['audit']>;
export type RetentionConfig = Slice<Table['retention']>;
export type ActivityConfig = Slice<Table['activity']>;

/** The resolved configuration: complete, validated, deep-frozen. Each top-level key is an injectable slice. */
export interface AppConfig extends Omit<
  Settings,
  'database' | 'operatorApiKey' | 'vaultKeys' | 'sandboxClientUnset'
> {
  readonly database: DatabaseConfig;
  /** Secret. OPERATOR_API_KEY, or generated once into `$DATA_DIR`. */
  readonly operatorApiKey: string;
  /** Secret. The first key encrypts, all decrypt. */
  readonly vaultKeys: readonly VaultKey[];
}

/**
 * What the environment says, validated; the database URL (unset: embedded), operator key and vault keys (unset:
 * generated into DATA_DIR) may still be open. `sandboxClientUnset`: the built-in sandbox's app credentials are not
 * configured (the demo values, unless generated ones are given).
 */
export type Settings = Readonly<ReturnType<typeof readSettings>>;

/** What only the starting process knows, for the values the environment left open. */
export interface RuntimeFacts {
  databaseUrl?: string;
  operatorApiKey?: string;
  vaultKeys?: readonly VaultKey[];
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
export function readSettings(env: Env, cwd = process.cwd()) {
  const problems: string[] = [];
  const raw = (name: string): string | undefined => env[name]?.trim() || undefined;
  /** The variable parsed, or its fallback when unset (and, with a problem noted, when invalid). */
  const read = <T>({ name, fallback, parse }: Var<T>): T => {
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
  /** The first of the names that is set (else the first): a variable, then its older or more general name. */
  const firstSet = (...names: string[]) => names.find((name) => raw(name) !== undefined) ?? names[0];
  const readSlice = <S extends Record<string, Var<unknown>>>(slice: S) =>
    Object.fromEntries(Object.entries(slice).map(([key, spec]) => [key, read(spec)])) as Slice<S>;

  /** Tracing is on with an OTLP endpoint, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. */
  const readTracing = (): TracingConfig | null => {
    const endpoint =
      read(v<string | undefined>('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', undefined, otlpEndpoint)) ??
      read(v<string | undefined>('OTEL_EXPORTER_OTLP_ENDPOINT', undefined, otlpEndpoint));
    const exporter = read(v('OTEL_TRACES_EXPORTER', 'otlp', oneOf(['otlp', 'none'])));
    const protocolVar = firstSet('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL');
    const protocol = read(
      v<OtlpProtocol>(protocolVar, 'http/protobuf', (s) =>
        s.toLowerCase() === 'grpc'
          ? invalid('grpc is not supported here: use http/protobuf (the default) or http/json')
          : oneOf(OTLP_PROTOCOLS)(s),
      ),
    );
    if (!endpoint || exporter === 'none' || raw('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
    return { protocol };
  };

  const port = read(int('PORT', 3000, 0, 65535));
  const publicBaseUrl = read(v('PUBLIC_BASE_URL', `http://localhost:${port}`, httpUrl));
  const databaseUrl = read(v<string | undefined>('DATABASE_URL', undefined, postgresUrl));
  // 6 instances × 12 = 72 of a stock Postgres's 100, leaving room for admin tools and migrations.
  const maxConnections = read(int(firstSet('DATABASE_MAX_CONNECTIONS', 'DATABASE_POOL_SIZE'), 12, 5, 500));
  const operatorApiKey = read(
    v<string | undefined>('OPERATOR_API_KEY', undefined, (s) =>
      s.length >= 24 ? s : invalid('must be at least 24 characters long'),
    ),
  );
  const vaultKeys = read(v<VaultKey[] | undefined>('VAULT_KEYS', undefined, parseVaultKeys));
  if (raw('VAULT_KEYS') === undefined && raw('DATABASE_URL') !== undefined) {
    problems.push(
      'VAULT_KEYS is required when DATABASE_URL is set (the generated key of the embedded default lives in ' +
        'DATA_DIR, which replicas do not share); generate one with `npm run cli -- vault:generate-key`',
    );
  }

  // The built-in sandbox is mounted unless a sandbox host is configured or the gateway is production-only, or when
  // asked for with SANDBOX_ENABLED=true (SANDBOX_ENABLED=false: never).
  const sandboxHost = raw('REWARDS_SANDBOX_BASE_URL') !== undefined;
  const productionOnly = !sandboxHost && raw('REWARDS_PRODUCTION_BASE_URL') !== undefined;
  const mountSandbox = read(flag('SANDBOX_ENABLED', !productionOnly)) && !sandboxHost;
  const environment = (name: RewardsEnvironment, baseUrl?: string): RewardsEnvironmentConfig => {
    const n = (suffix: string) => `REWARDS_${name.toUpperCase()}_${suffix}`;
    const rps = read(int(n('RATE_LIMIT_RPS'), 10, 0, 10_000));
    const burst = read(int(n('RATE_LIMIT_BURST'), 1, 1, 10_000));
    if (rps > 0 && burst >= rps)
      problems.push(
        `${n('RATE_LIMIT_BURST')} must be below ${n('RATE_LIMIT_RPS')} (a burst of ${burst} plus the next second's requests would exceed ${rps} per second)`,
      );
    if (baseUrl === undefined)
      for (const credential of [n('CLIENT_ID'), n('CLIENT_SECRET')])
        if (raw(credential) === undefined)
          problems.push(`${credential} is required when ${n('BASE_URL')} is set`);
    return {
      name,
      baseUrl: baseUrl ?? read(v(n('BASE_URL'), '', httpUrl)),
      clientId: raw(n('CLIENT_ID')) ?? (baseUrl ? EMBEDDED_SANDBOX_CLIENT.clientId : ''),
      clientSecret: raw(n('CLIENT_SECRET')) ?? (baseUrl ? EMBEDDED_SANDBOX_CLIENT.clientSecret : ''),
      embedded: baseUrl !== undefined,
      pkce: read(flag(n('PKCE'), true)),
      orderShape: read(v(n('ORDER_SHAPE'), 'single', oneOf(ORDER_SHAPES))),
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
    v(
      'REWARDS_DEFAULT_ENVIRONMENT',
      rewards.production ? 'production' : 'sandbox',
      oneOf(REWARDS_ENVIRONMENTS),
    ),
  );
  if (!rewards[defaultEnvironment])
    problems.push(
      `REWARDS_DEFAULT_ENVIRONMENT is ${defaultEnvironment} but that environment is not configured`,
    );

  const slices = table(mountSandbox && !rewards.production);
  const dispatch = readSlice(slices.dispatch);
  if (dispatch.retryMaxMs < dispatch.retryBaseMs)
    problems.push('DISPATCH_RETRY_MAX_MS must not be below DISPATCH_RETRY_BASE_MS');
  if (dispatch.leaseMs <= dispatch.upstreamTimeoutMs)
    problems.push(
      'DISPATCH_LEASE_MS must be longer than DISPATCH_UPSTREAM_TIMEOUT_MS (a live send must not look dead)',
    );
  const ops = readSlice(slices.ops);
  if (raw('OPS_WEBHOOK_URL') !== undefined && (ops.webhookSecret ?? '').length < 16)
    problems.push('OPS_WEBHOOK_SECRET (at least 16 characters) is required when OPS_WEBHOOK_URL is set');
  const webhooks = readSlice(slices.webhooks);

  const settings = {
    port,
    publicBaseUrl,
    logLevel: read(v('LOG_LEVEL', 'info', oneOf(LOG_LEVELS))),
    dataDir: path.resolve(cwd, raw('DATA_DIR') ?? './.data'),
    database: { url: databaseUrl, maxConnections },
    operatorApiKey,
    vaultKeys,
    rewards: rewards as RewardsConfig,
    defaultEnvironment,
    /** Mount the rewards-service emulator in this process under `/sandbox`. */
    mountSandbox,
    sandboxClientUnset:
      mountSandbox &&
      raw('REWARDS_SANDBOX_CLIENT_ID') === undefined &&
      raw('REWARDS_SANDBOX_CLIENT_SECRET') === undefined,
    /** The sandbox's `/__control` test API (never in production). */
    sandboxControl: read(flag('SANDBOX_CONTROL_ENABLED', false)),
    sandboxRateLimitRps: read(int('SANDBOX_RATE_LIMIT_RPS', 10, 0, 100_000)),
    dispatch,
    ops,
    webhooks,
    tokens: readSlice(slices.tokens),
    audit: readSlice(slices.audit),
    retention: readSlice(slices.retention),
    tracing: readTracing(),
    activity: readSlice(slices.activity),
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
  const entries = raw.split(',').map((e) => e.trim());
  for (const [index, entry] of entries.entries()) {
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

/** A value a parser refuses: the reasons complete "<VARIABLE> …". Never the value itself when it is a secret. */
class Invalid extends Error {
  constructor(readonly reasons: string[]) {
    super(reasons.join('; '));
  }
}
function invalid(...reasons: string[]): never {
  throw new Invalid(reasons);
}

function v<T>(name: string, fallback: NoInfer<T>, parse: (value: string) => T): Var<T> {
  return { name, fallback, parse };
}

function int(name: string, fallback: number, min: number, max: number): Var<number> {
  return v(name, fallback, (s) =>
    /^\d+$/.test(s) && Number(s) >= min && Number(s) <= max
      ? Number(s)
      : invalid(`must be a whole number from ${min} to ${max} (got "${s}")`),
  );
}

function flag(name: string, fallback: boolean): Var<boolean> {
  return v(name, fallback, (s) => {
    const value = s.toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['0', 'false', 'no', 'off'].includes(value)) return false;
    return invalid(`must be true or false (got "${s}")`);
  });
}

function waits(s: string): number[] {
  const list = s.split(',').map((w) => Number(w.trim()));
  return list.every((w) => Number.isInteger(w) && w >= 10 && w <= 7 * DAY)
    ? list
    : invalid(`must be a comma-separated list of waits in ms, each from 10 to ${7 * DAY} (got "${s}")`);
}

const oneOf =
  <T extends string>(values: readonly T[]) =>
  (s: string): T =>
    values.includes(s.toLowerCase() as T)
      ? (s.toLowerCase() as T)
      : invalid(`must be one of ${values.join(', ')} (got "${s}")`);

/** An absolute http(s) URL; `bare`: without query or fragment, trailing slashes dropped. */
function checkedUrl(s: string, bare: boolean): string {
  try {
    const url = new URL(s);
    if ((url.protocol === 'http:' || url.protocol === 'https:') && !(bare && (url.search || url.hash)))
      return bare ? url.toString().replace(/\/+$/, '') : s;
  } catch {
    // reported below
  }
  return invalid(`must be an absolute http(s) URL${bare ? ' without query or fragment' : ''} (got "${s}")`);
}
const httpUrl = (s: string) => checkedUrl(s, true);
/** An OTLP/HTTP endpoint, kept as given (the exporter reads the variable itself). */
const otlpEndpoint = (s: string) => checkedUrl(s, false);

/** Never echoed: the URL may hold a password. */
const postgresUrl = (s: string) =>
  /^postgres(ql)?:\/\/.+/.test(s) ? s : invalid('must be a postgres:// or postgresql:// connection URL');

/** Freezes a value and everything it holds (buffers excepted: a typed array cannot be frozen). */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !ArrayBuffer.isView(value) && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
