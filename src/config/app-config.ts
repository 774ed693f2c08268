import * as path from 'node:path';

/**
 * The gateway's configuration, typed and validated once at start-up (see `parseConfig`).
 * Every value comes from an environment variable documented in `.env.example` and docs/configuration.md.
 */
export type RewardsEnvironment = 'sandbox' | 'production';

/** Per process: 6 instances × 12 = 72 of a stock Postgres's 100, leaving room for admin tools and migrations. */
export const DEFAULT_MAX_CONNECTIONS = 12;
export const REWARDS_ENVIRONMENTS: readonly RewardsEnvironment[] = ['sandbox', 'production'];

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface RewardsEnvironmentConfig {
  name: RewardsEnvironment;
  /** Base URL of the rewards service (no trailing slash); `/oauth/...` and `/api/v2/...` hang below it. */
  baseUrl: string;
  clientId: string;
  /** Secret: never logged, never returned. */
  clientSecret: string;
  /** True when the base URL points at the sandbox mounted inside this process (`/sandbox`). */
  embedded: boolean;
  /** The mounted sandbox's app credentials were not configured: generated per DATA_DIR at start-up. */
  generatedCredentials?: boolean;
  /** Send PKCE (S256) on the authorization request. Default true in every environment (`REWARDS_<ENV>_PKCE=false` opts out). */
  pkce: boolean;
  /**
   * How orders go upstream: `single` (the current service: one `reward` per `POST /orders`, a dispatch of N rewards
   * is N orders) or `array` (the older form: one order with `rewards: [...]`).
   */
  orderShape: OrderShape;
  /** Per-account pacing of every upstream call (rewards-api/account-pacer.ts). */
  pacing: PacingConfig;
}

/**
 * The service's limit per account: at most `rps` requests in any 1-second interval (0 = do not pace). `burst`
 * requests may go back to back on an idle account; the spacing is widened so a burst plus the next second's
 * requests still stay within `rps` (see account-pacer.ts).
 */
export interface PacingConfig {
  rps: number;
  burst: number;
}

export type OrderShape = 'single' | 'array';
export const ORDER_SHAPES: readonly OrderShape[] = ['single', 'array'];

export interface VaultKey {
  id: string;
  /** 32 bytes for AES-256-GCM. Secret. */
  key: Buffer;
}

export interface AppConfig {
  port: number;
  publicBaseUrl: string;
  /** Unset → the gateway runs an embedded Postgres in `$DATA_DIR/postgres`. */
  databaseUrl?: string;
  /**
   * Connections this process may hold in all (every pool), split by `database/pg-pools`. Default 12: six instances
   * fit a stock Postgres (100) with room for admin tools.
   */
  databaseMaxConnections: number;
  dataDir: string;
  /** Secret. Filled at start-up (generated into `$DATA_DIR`) when the variable is unset. */
  operatorApiKey?: string;
  /** Secret. The first key encrypts, all decrypt. Filled at start-up in the embedded default. */
  vaultKeys: VaultKey[];
  rewards: Partial<Record<RewardsEnvironment, RewardsEnvironmentConfig>>;
  defaultEnvironment: RewardsEnvironment;
  /** Mount the rewards-service emulator in this process under `/sandbox`. */
  mountSandbox: boolean;
  /** Enable the sandbox's `/__control` test API (never in production). */
  sandboxControl: boolean;
  /** The mounted sandbox's per-account limit (requests in any 1-second interval; 0 = off), as the service has it. */
  sandboxRateLimitRps: number;
  logLevel: LogLevel;
  dispatch: DispatchConfig;
  ops: OpsConfig;
  /** Tenant webhooks (src/tenant-webhooks): delivery from the outbox. */
  webhooks: TenantWebhooksConfig;
}

/** Tenant webhooks: signed event deliveries from the durable outbox (`webhook_outbox`). */
export interface TenantWebhooksConfig {
  /**
   * Deliver to loopback / private / link-local / CGNAT / multicast addresses too. Off by default; on by default only
   * for a demo gateway (the built-in sandbox mounted, no production environment), where receivers run locally.
   */
  allowPrivateTargets: boolean;
  /** How often each instance looks for due deliveries. */
  pollMs: number;
  /** Waits after each failed attempt (the last one repeats). */
  retryScheduleMs: number[];
  /** An event still not delivered this long after it was queued is `failed`. */
  giveUpAfterMs: number;
  /** An endpoint failing continuously (no success) this long is disabled. */
  disableAfterMs: number;
  /** Timeout of one delivery (connect, answer and the capped body read). */
  timeoutMs: number;
  /** Deliveries in flight per instance (at most 4 per endpoint). */
  concurrency: number;
}

export interface OpsConfig {
  /** Where connection alerts (broken / recovered) are POSTed; unset: alerts are only logged. */
  webhookUrl?: string;
  /** HMAC-SHA256 key signing each alert. Secret. */
  webhookSecret?: string;
  /** A connection unused this long is `idle` and probed in the background. */
  idleAfterMs: number;
  /** How often each instance looks for connections to probe (0 disables the background probe). */
  probeIntervalMs: number;
}

export interface DispatchConfig {
  /** Attempts (the first included) before a dispatch fails for good on transient errors. */
  maxAttempts: number;
  /** First retry delay; doubles per attempt (with jitter) up to `retryMaxMs`; Retry-After wins when longer. */
  retryBaseMs: number;
  /** The longest wait between two attempts (before Retry-After). */
  retryMaxMs: number;
  /** A dispatch in `sending` longer than this (its process died) is claimed again. Must exceed the upstream timeout. */
  leaseMs: number;
  /** How often each instance's worker looks for due dispatches. */
  pollMs: number;
  /** Timeout of the upstream order call. */
  upstreamTimeoutMs: number;
  /** How often an order held for approval upstream is checked again (`GET /orders/{id}`). */
  approvalCheckMs: number;
  /**
   * A send of at most this many rewards is interactive: answered after its orders went out. A larger one is a batch:
   * stored, answered 202 at once, and sent by the workers at the account's pace behind interactive sends.
   */
  inlineMaxRewards: number;
  /** The most rewards one dispatch (a batch) may hold. */
  maxRewards: number;
  /**
   * A sent reward (EMAIL / PHONE) whose delivery is still not final this long after it was sent is polled
   * (`GET /rewards/{id}`, at the account's pace) — reconciliation for missed webhooks — and again every
   * `deliveryRecheckMs` until final.
   */
  deliveryReconcileAfterMs: number;
  deliveryRecheckMs: number;
  /** How often each instance's delivery reconciliation (and webhook registration retry) job runs. */
  deliveryReconcilePollMs: number;
  /** Register the gateway's delivery webhook with the service when a connection becomes active. */
  deliveryWebhooksRegister: boolean;
  /** First wait before a failed webhook registration is tried again; doubles per attempt, at most 1 h. */
  deliveryWebhookRetryMs: number;
}

/** The built-in sandbox's pre-registered developer app. Not a secret: it only opens the local emulator. */
export const EMBEDDED_SANDBOX_CLIENT = {
  clientId: 'rewards-gateway-demo',
  clientSecret: 'sandbox-demo-secret',
};

export class ConfigValidationError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigValidationError';
  }
}

type Env = Record<string, string | undefined>;

/** Parses and validates the environment. Collects every problem before failing, so one run shows them all. */
export function parseConfig(env: Env, cwd = process.cwd()): AppConfig {
  const problems: string[] = [];
  const get = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };

  const port = parseIntVar(get('PORT'), 3000, 'PORT', 0, 65535, problems);
  const publicBaseUrl = parseUrlVar(
    get('PUBLIC_BASE_URL') ?? `http://localhost:${port}`,
    'PUBLIC_BASE_URL',
    problems,
  );

  const databaseUrl = get('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    problems.push('DATABASE_URL must be a postgres:// or postgresql:// connection URL');
  }
  // DATABASE_POOL_SIZE (older name) is read when DATABASE_MAX_CONNECTIONS is not set.
  const budgetVar =
    get('DATABASE_MAX_CONNECTIONS') !== undefined || get('DATABASE_POOL_SIZE') === undefined
      ? 'DATABASE_MAX_CONNECTIONS'
      : 'DATABASE_POOL_SIZE';
  const databaseMaxConnections = parseIntVar(
    get(budgetVar),
    DEFAULT_MAX_CONNECTIONS,
    budgetVar,
    5,
    500,
    problems,
  );
  const dataDir = path.resolve(cwd, get('DATA_DIR') ?? './.data');

  const operatorApiKey = get('OPERATOR_API_KEY');
  if (operatorApiKey !== undefined && operatorApiKey.length < 24) {
    problems.push('OPERATOR_API_KEY must be at least 24 characters long');
  }

  const vaultKeysRaw = get('VAULT_KEYS');
  const vaultKeys = vaultKeysRaw === undefined ? [] : parseVaultKeys(vaultKeysRaw, problems);
  if (vaultKeysRaw === undefined && databaseUrl !== undefined) {
    problems.push(
      'VAULT_KEYS is required when DATABASE_URL is set (the generated key of the embedded default lives in ' +
        'DATA_DIR, which replicas do not share); generate one with `npm run cli -- vault:generate-key`',
    );
  }

  const sandboxBase = get('REWARDS_SANDBOX_BASE_URL');
  const productionOnly = sandboxBase === undefined && get('REWARDS_PRODUCTION_BASE_URL') !== undefined;
  const sandboxEnabled =
    get('SANDBOX_ENABLED') === undefined
      ? undefined
      : parseBoolVar(get('SANDBOX_ENABLED'), false, 'SANDBOX_ENABLED', problems);
  // The built-in sandbox is mounted only when a sandbox environment uses it — no sandbox host configured and not a
  // production-only gateway — or when asked for with SANDBOX_ENABLED=true (SANDBOX_ENABLED=false: never).
  const mountSandbox = sandboxBase === undefined && (sandboxEnabled ?? !productionOnly);
  const rewards: AppConfig['rewards'] = {};
  if (mountSandbox) {
    const clientId = get('REWARDS_SANDBOX_CLIENT_ID');
    const clientSecret = get('REWARDS_SANDBOX_CLIENT_SECRET');
    rewards.sandbox = {
      name: 'sandbox',
      baseUrl: `${publicBaseUrl}/sandbox`,
      clientId: clientId ?? EMBEDDED_SANDBOX_CLIENT.clientId,
      clientSecret: clientSecret ?? EMBEDDED_SANDBOX_CLIENT.clientSecret,
      // Unset: `npm start` replaces them with credentials generated once into DATA_DIR (bootstrap).
      generatedCredentials: clientId === undefined && clientSecret === undefined,
      embedded: true,
      pkce: parseBoolVar(get('REWARDS_SANDBOX_PKCE'), true, 'REWARDS_SANDBOX_PKCE', problems),
      orderShape: parseOrderShape(
        get('REWARDS_SANDBOX_ORDER_SHAPE'),
        'REWARDS_SANDBOX_ORDER_SHAPE',
        problems,
      ),
      pacing: parsePacing('SANDBOX', get, problems),
    };
  } else if (sandboxBase !== undefined) {
    rewards.sandbox = parseEnvironment('sandbox', 'SANDBOX', sandboxBase, get, problems);
  }
  const productionBase = get('REWARDS_PRODUCTION_BASE_URL');
  if (productionBase !== undefined) {
    rewards.production = parseEnvironment('production', 'PRODUCTION', productionBase, get, problems);
  } else if (get('REWARDS_PRODUCTION_CLIENT_ID') || get('REWARDS_PRODUCTION_CLIENT_SECRET')) {
    problems.push('REWARDS_PRODUCTION_CLIENT_ID/SECRET are set but REWARDS_PRODUCTION_BASE_URL is not');
  }

  if (!rewards.sandbox && !rewards.production) {
    problems.push(
      'no rewards environment is configured: set REWARDS_SANDBOX_BASE_URL or REWARDS_PRODUCTION_BASE_URL, or leave SANDBOX_ENABLED unset for the built-in sandbox',
    );
  }
  const defaultEnvRaw = get('REWARDS_DEFAULT_ENVIRONMENT') ?? (rewards.production ? 'production' : 'sandbox');
  let defaultEnvironment: RewardsEnvironment = 'sandbox';
  if (!REWARDS_ENVIRONMENTS.includes(defaultEnvRaw as RewardsEnvironment)) {
    problems.push(`REWARDS_DEFAULT_ENVIRONMENT must be one of ${REWARDS_ENVIRONMENTS.join(', ')}`);
  } else if (!rewards[defaultEnvRaw as RewardsEnvironment]) {
    problems.push(`REWARDS_DEFAULT_ENVIRONMENT is ${defaultEnvRaw} but that environment is not configured`);
  } else {
    defaultEnvironment = defaultEnvRaw as RewardsEnvironment;
  }

  const sandboxControl = parseBoolVar(
    get('SANDBOX_CONTROL_ENABLED'),
    false,
    'SANDBOX_CONTROL_ENABLED',
    problems,
  );
  const sandboxRateLimitRps = parseIntVar(
    get('SANDBOX_RATE_LIMIT_RPS'),
    10,
    'SANDBOX_RATE_LIMIT_RPS',
    0,
    100_000,
    problems,
  );

  const logLevelRaw = (get('LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevelRaw as LogLevel)) {
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  }

  const dispatch: DispatchConfig = {
    maxAttempts: parseIntVar(get('DISPATCH_MAX_ATTEMPTS'), 10, 'DISPATCH_MAX_ATTEMPTS', 1, 100, problems),
    retryBaseMs: parseIntVar(
      get('DISPATCH_RETRY_BASE_MS'),
      2_000,
      'DISPATCH_RETRY_BASE_MS',
      10,
      600_000,
      problems,
    ),
    retryMaxMs: parseIntVar(
      get('DISPATCH_RETRY_MAX_MS'),
      300_000,
      'DISPATCH_RETRY_MAX_MS',
      100,
      3_600_000,
      problems,
    ),
    leaseMs: parseIntVar(get('DISPATCH_LEASE_MS'), 60_000, 'DISPATCH_LEASE_MS', 1_000, 3_600_000, problems),
    pollMs: parseIntVar(get('DISPATCH_POLL_MS'), 1_000, 'DISPATCH_POLL_MS', 50, 60_000, problems),
    upstreamTimeoutMs: parseIntVar(
      get('DISPATCH_UPSTREAM_TIMEOUT_MS'),
      15_000,
      'DISPATCH_UPSTREAM_TIMEOUT_MS',
      100,
      120_000,
      problems,
    ),
    approvalCheckMs: parseIntVar(
      get('DISPATCH_APPROVAL_CHECK_MS'),
      60_000,
      'DISPATCH_APPROVAL_CHECK_MS',
      50,
      86_400_000,
      problems,
    ),
    inlineMaxRewards: parseIntVar(
      get('DISPATCH_INLINE_MAX_REWARDS'),
      10,
      'DISPATCH_INLINE_MAX_REWARDS',
      1,
      100,
      problems,
    ),
    maxRewards: parseIntVar(get('DISPATCH_MAX_REWARDS'), 10_000, 'DISPATCH_MAX_REWARDS', 1, 10_000, problems),
    deliveryReconcileAfterMs: parseIntVar(
      get('DELIVERY_RECONCILE_AFTER_MS'),
      15 * 60_000,
      'DELIVERY_RECONCILE_AFTER_MS',
      100,
      7 * 86_400_000,
      problems,
    ),
    deliveryRecheckMs: parseIntVar(
      get('DELIVERY_RECHECK_MS'),
      60 * 60_000,
      'DELIVERY_RECHECK_MS',
      100,
      7 * 86_400_000,
      problems,
    ),
    deliveryReconcilePollMs: parseIntVar(
      get('DELIVERY_RECONCILE_POLL_MS'),
      30_000,
      'DELIVERY_RECONCILE_POLL_MS',
      50,
      86_400_000,
      problems,
    ),
    deliveryWebhooksRegister: parseBoolVar(
      get('DELIVERY_WEBHOOKS_REGISTER'),
      true,
      'DELIVERY_WEBHOOKS_REGISTER',
      problems,
    ),
    deliveryWebhookRetryMs: parseIntVar(
      get('DELIVERY_WEBHOOK_RETRY_MS'),
      60_000,
      'DELIVERY_WEBHOOK_RETRY_MS',
      50,
      3_600_000,
      problems,
    ),
  };
  if (dispatch.retryMaxMs < dispatch.retryBaseMs)
    problems.push('DISPATCH_RETRY_MAX_MS must not be below DISPATCH_RETRY_BASE_MS');
  if (dispatch.leaseMs <= dispatch.upstreamTimeoutMs) {
    problems.push(
      'DISPATCH_LEASE_MS must be longer than DISPATCH_UPSTREAM_TIMEOUT_MS (a live send must not look dead)',
    );
  }

  const webhookUrl = get('OPS_WEBHOOK_URL');
  const ops: OpsConfig = {
    webhookUrl: webhookUrl === undefined ? undefined : parseUrlVar(webhookUrl, 'OPS_WEBHOOK_URL', problems),
    webhookSecret: get('OPS_WEBHOOK_SECRET'),
    idleAfterMs: parseIntVar(
      get('OPS_IDLE_AFTER_MS'),
      6 * 3600_000,
      'OPS_IDLE_AFTER_MS',
      1_000,
      365 * 86_400_000,
      problems,
    ),
    probeIntervalMs: parseIntVar(
      get('OPS_PROBE_INTERVAL_MS'),
      60_000,
      'OPS_PROBE_INTERVAL_MS',
      0,
      86_400_000,
      problems,
    ),
  };
  if (ops.webhookUrl && (!ops.webhookSecret || ops.webhookSecret.length < 16)) {
    problems.push('OPS_WEBHOOK_SECRET (at least 16 characters) is required when OPS_WEBHOOK_URL is set');
  }

  const retryScheduleRaw = get('WEBHOOK_RETRY_SCHEDULE_MS');
  const retryScheduleMs =
    retryScheduleRaw === undefined
      ? [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000]
      : retryScheduleRaw.split(',').map((v) => Number(v.trim()));
  if (
    retryScheduleMs.some((v) => !Number.isInteger(v) || v < 10 || v > 7 * 86_400_000) ||
    !retryScheduleMs.length
  )
    problems.push(
      `WEBHOOK_RETRY_SCHEDULE_MS must be a comma-separated list of waits in ms, each from 10 to 604800000 (got "${retryScheduleRaw}")`,
    );
  const webhooks: TenantWebhooksConfig = {
    // Default on only for a demo gateway: the built-in sandbox mounted and no production environment.
    allowPrivateTargets: parseBoolVar(
      get('WEBHOOK_ALLOW_PRIVATE_TARGETS'),
      mountSandbox && !rewards.production,
      'WEBHOOK_ALLOW_PRIVATE_TARGETS',
      problems,
    ),
    pollMs: parseIntVar(get('WEBHOOK_POLL_MS'), 1_000, 'WEBHOOK_POLL_MS', 20, 60_000, problems),
    retryScheduleMs,
    giveUpAfterMs: parseIntVar(
      get('WEBHOOK_GIVE_UP_AFTER_MS'),
      3 * 86_400_000,
      'WEBHOOK_GIVE_UP_AFTER_MS',
      100,
      30 * 86_400_000,
      problems,
    ),
    disableAfterMs: parseIntVar(
      get('WEBHOOK_DISABLE_AFTER_MS'),
      5 * 86_400_000,
      'WEBHOOK_DISABLE_AFTER_MS',
      100,
      90 * 86_400_000,
      problems,
    ),
    timeoutMs: parseIntVar(get('WEBHOOK_TIMEOUT_MS'), 10_000, 'WEBHOOK_TIMEOUT_MS', 100, 60_000, problems),
    concurrency: parseIntVar(get('WEBHOOK_CONCURRENCY'), 16, 'WEBHOOK_CONCURRENCY', 1, 256, problems),
  };

  if (problems.length > 0) throw new ConfigValidationError(problems);
  return {
    ops,
    webhooks,
    dispatch,
    port,
    publicBaseUrl,
    databaseUrl,
    databaseMaxConnections,
    dataDir,
    operatorApiKey,
    vaultKeys,
    rewards,
    defaultEnvironment,
    mountSandbox,
    sandboxControl,
    sandboxRateLimitRps,
    logLevel: logLevelRaw as LogLevel,
  };
}

function parseEnvironment(
  name: RewardsEnvironment,
  prefix: string,
  baseUrl: string,
  get: (name: string) => string | undefined,
  problems: string[],
): RewardsEnvironmentConfig {
  const clientId = get(`REWARDS_${prefix}_CLIENT_ID`);
  const clientSecret = get(`REWARDS_${prefix}_CLIENT_SECRET`);
  if (!clientId)
    problems.push(`REWARDS_${prefix}_CLIENT_ID is required when REWARDS_${prefix}_BASE_URL is set`);
  if (!clientSecret) {
    problems.push(`REWARDS_${prefix}_CLIENT_SECRET is required when REWARDS_${prefix}_BASE_URL is set`);
  }
  // PKCE (S256) is on by default in every environment (RFC 9700 §2.1.1); `REWARDS_<ENV>_PKCE=false` opts one out.
  const pkce = parseBoolVar(get(`REWARDS_${prefix}_PKCE`), true, `REWARDS_${prefix}_PKCE`, problems);
  return {
    name,
    baseUrl: parseUrlVar(baseUrl, `REWARDS_${prefix}_BASE_URL`, problems),
    clientId: clientId ?? '',
    clientSecret: clientSecret ?? '',
    embedded: false,
    pkce,
    orderShape: parseOrderShape(
      get(`REWARDS_${prefix}_ORDER_SHAPE`),
      `REWARDS_${prefix}_ORDER_SHAPE`,
      problems,
    ),
    pacing: parsePacing(prefix, get, problems),
  };
}

/** `REWARDS_<ENV>_RATE_LIMIT_RPS` (default 10, the service's documented limit; 0 = off) and `_BURST` (default 1). */
function parsePacing(
  prefix: string,
  get: (name: string) => string | undefined,
  problems: string[],
): PacingConfig {
  const rps = parseIntVar(
    get(`REWARDS_${prefix}_RATE_LIMIT_RPS`),
    10,
    `REWARDS_${prefix}_RATE_LIMIT_RPS`,
    0,
    10_000,
    problems,
  );
  const burst = parseIntVar(
    get(`REWARDS_${prefix}_RATE_LIMIT_BURST`),
    1,
    `REWARDS_${prefix}_RATE_LIMIT_BURST`,
    1,
    10_000,
    problems,
  );
  if (rps > 0 && burst >= rps)
    problems.push(
      `REWARDS_${prefix}_RATE_LIMIT_BURST must be below REWARDS_${prefix}_RATE_LIMIT_RPS (a burst of ${burst} plus the next second's requests would exceed ${rps} per second)`,
    );
  return { rps, burst };
}

function parseOrderShape(raw: string | undefined, name: string, problems: string[]): OrderShape {
  if (raw === undefined) return 'single';
  const v = raw.toLowerCase();
  if ((ORDER_SHAPES as readonly string[]).includes(v)) return v as OrderShape;
  problems.push(`${name} must be one of ${ORDER_SHAPES.join(', ')} (got "${raw}")`);
  return 'single';
}

function parseIntVar(
  raw: string | undefined,
  fallback: number,
  name: string,
  min: number,
  max: number,
  problems: string[],
): number {
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    problems.push(`${name} must be a whole number from ${min} to ${max} (got "${raw}")`);
    return fallback;
  }
  return Number(raw);
}

function parseBoolVar(raw: string | undefined, fallback: boolean, name: string, problems: string[]): boolean {
  if (raw === undefined) return fallback;
  const v = raw.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  problems.push(`${name} must be true or false (got "${raw}")`);
  return fallback;
}

function parseUrlVar(raw: string, name: string, problems: string[]): string {
  try {
    const url = new URL(raw);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('protocol');
    if (url.search || url.hash) throw new Error('query');
    return url.toString().replace(/\/+$/, '');
  } catch {
    problems.push(`${name} must be an absolute http(s) URL without query or fragment (got "${raw}")`);
    return raw;
  }
}

/** `VAULT_KEYS=k2:<base64 32 bytes>,k1:<base64 32 bytes>` — the first encrypts, all decrypt. */
export function parseVaultKeys(raw: string, problems: string[]): VaultKey[] {
  const keys: VaultKey[] = [];
  for (const [index, entry] of raw
    .split(',')
    .map((e) => e.trim())
    .entries()) {
    const sep = entry.indexOf(':');
    const id = sep > 0 ? entry.slice(0, sep) : '';
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id)) {
      problems.push(
        `VAULT_KEYS entry ${index + 1} must look like <id>:<base64 key> with an id of [A-Za-z0-9_-]{1,32}`,
      );
      continue;
    }
    const key = Buffer.from(entry.slice(sep + 1), 'base64');
    if (key.length !== 32) {
      problems.push(`VAULT_KEYS key "${id}" must be 32 bytes, base64-encoded (got ${key.length} bytes)`);
      continue;
    }
    if (keys.some((k) => k.id === id)) {
      problems.push(`VAULT_KEYS key id "${id}" appears twice`);
      continue;
    }
    keys.push({ id, key });
  }
  return keys;
}
