import { randomBytes } from 'node:crypto';
import { ConfigValidationError, readSettings, resolveConfig } from './app-config';

const key = () => randomBytes(32).toString('base64');

describe('the configuration', () => {
  it('runs with no variables at all: embedded database, built-in sandbox, port 3000', () => {
    const settings = readSettings({}, '/srv/app');
    expect(settings.port).toBe(3000);
    expect(settings.publicBaseUrl).toBe('http://localhost:3000');
    expect(settings.database).toEqual({ url: undefined, maxConnections: 12 });
    expect(settings.operatorApiKey).toBeUndefined();
    expect(settings.vaultKeys).toBeUndefined();
    expect(settings.sandboxClientUnset).toBe(true);
    expect(settings.dataDir).toBe('/srv/app/.data');
    expect(settings.mountSandbox).toBe(true);
    expect(settings.rewards.sandbox?.baseUrl).toBe('http://localhost:3000/sandbox');
    expect(settings.defaultEnvironment).toBe('sandbox');
    expect(settings.logLevel).toBe('info');
    // The waits the tests shorten (each e2e test that sets one proves its behaviour with a shorter value).
    expect(settings.tokens).toEqual({ refreshLockTimeoutMs: 5_000, appCredentialsRetryMs: 10_000 });
    expect(settings.webhooks.leaseMarginMs).toBe(20_000);
  });

  it('traces only with an OTLP endpoint: protobuf by default, JSON on request, grpc refused by name', () => {
    expect(readSettings({}, '/srv/app').tracing).toBeNull();
    expect(readSettings({ OTEL_SERVICE_NAME: 'gw' }, '/srv/app').tracing).toBeNull();
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(readSettings(endpoint, '/srv/app').tracing).toEqual({ protocol: 'http/protobuf' });
    expect(
      readSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c.example/v1/traces' }, '/srv/app').tracing,
    ).toEqual({ protocol: 'http/protobuf' });
    expect(
      readSettings({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, '/srv/app').tracing,
    ).toEqual({ protocol: 'http/json' });
    expect(
      readSettings(
        {
          ...endpoint,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
        },
        '/srv/app',
      ).tracing,
    ).toEqual({ protocol: 'http/protobuf' });
    expect(readSettings({ ...endpoint, OTEL_SDK_DISABLED: 'true' }, '/srv/app').tracing).toBeNull();
    expect(readSettings({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }, '/srv/app').tracing).toBeNull();
    expect(() => readSettings({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, '/srv/app')).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL grpc is not supported here/,
    );
    expect(() => readSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, '/srv/app')).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT must be an absolute http\(s\) URL/,
    );
  });

  it('is completed by what the starting process provides, then frozen all the way down', () => {
    const settings = readSettings({}, '/srv/app');
    expect(() => resolveConfig(settings)).toThrow(/DATABASE_URL.*\n.*OPERATOR_API_KEY.*\n.*VAULT_KEYS/);
    const vaultKeys = [{ id: 'local1', key: randomBytes(32) }];
    const config = resolveConfig(settings, {
      databaseUrl: 'postgres://127.0.0.1:5999/rewards_gateway',
      operatorApiKey: `rgo_${'k'.repeat(43)}`,
      vaultKeys,
      sandboxClient: { clientId: 'rg-sandbox-1', clientSecret: 'generated-secret' },
    });
    expect(config.database).toEqual({ url: 'postgres://127.0.0.1:5999/rewards_gateway', maxConnections: 12 });
    expect(config.vaultKeys).toEqual(vaultKeys);
    expect(config.rewards.sandbox).toMatchObject({
      clientId: 'rg-sandbox-1',
      clientSecret: 'generated-secret',
    });
    expect('sandboxClientUnset' in config).toBe(false);
    for (const frozen of [
      config,
      config.database,
      config.dispatch,
      config.webhooks.retryScheduleMs,
      config.vaultKeys,
    ])
      expect(Object.isFrozen(frozen)).toBe(true);
    expect(Object.isFrozen(config.rewards.sandbox?.pacing)).toBe(true);
    expect(() => {
      (config.dispatch as { leaseMs: number }).leaseMs = 1;
    }).toThrow(TypeError);
  });

  it('reads DATABASE_POOL_SIZE when DATABASE_MAX_CONNECTIONS is unset', () => {
    expect(readSettings({ DATABASE_POOL_SIZE: '20' }).database.maxConnections).toBe(20);
    expect(
      readSettings({ DATABASE_POOL_SIZE: '20', DATABASE_MAX_CONNECTIONS: '30' }).database.maxConnections,
    ).toBe(30);
    expect(() => readSettings({ DATABASE_POOL_SIZE: '2' })).toThrow(
      /DATABASE_POOL_SIZE must be a whole number/,
    );
  });

  it('lists every problem at once', () => {
    let error: unknown;
    try {
      readSettings({
        PORT: 'eighty',
        PUBLIC_BASE_URL: 'not a url',
        DATABASE_URL: 'mysql://x',
        OPERATOR_API_KEY: 'short',
        VAULT_KEYS: 'k1:abc',
        REWARDS_PRODUCTION_BASE_URL: 'https://rewards.example.com',
        LOG_LEVEL: 'loud',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigValidationError);
    const problems = (error as ConfigValidationError).problems.join('\n');
    for (const name of [
      'PORT',
      'PUBLIC_BASE_URL',
      'DATABASE_URL',
      'OPERATOR_API_KEY',
      'VAULT_KEYS',
      'REWARDS_PRODUCTION_CLIENT_ID',
      'REWARDS_PRODUCTION_CLIENT_SECRET',
      'LOG_LEVEL',
    ]) {
      expect(problems).toContain(name);
    }
  });

  it('requires VAULT_KEYS with an external database, and parses several keys in order', () => {
    expect(() => readSettings({ DATABASE_URL: 'postgres://h/db' })).toThrow(/VAULT_KEYS is required/);
    const settings = readSettings({
      DATABASE_URL: 'postgres://h/db',
      VAULT_KEYS: `new:${key()}, old:${key()}`,
    });
    expect(settings.vaultKeys?.map((k) => k.id)).toEqual(['new', 'old']);
    expect(() => readSettings({ VAULT_KEYS: `a:${key()},a:${key()}` })).toThrow(/appears twice/);
  });

  it('never repeats a secret in a problem', () => {
    const secret = 'postgres://gateway:hunter2-hunter2@db/x';
    let message = '';
    try {
      readSettings({
        DATABASE_URL: `mysql${secret.slice(8)}`,
        OPERATOR_API_KEY: 'hunter2-short',
        VAULT_KEYS: 'k:hunter2',
      });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/DATABASE_URL[\s\S]*OPERATOR_API_KEY[\s\S]*VAULT_KEYS/);
    expect(message).not.toContain('hunter2');
  });

  it('uses a configured sandbox host instead of the built-in one, with its credentials required', () => {
    expect(() => readSettings({ REWARDS_SANDBOX_BASE_URL: 'https://sandbox.example.com' })).toThrow(
      /REWARDS_SANDBOX_CLIENT_ID/,
    );
    const config = readSettings({
      REWARDS_SANDBOX_BASE_URL: 'https://sandbox.example.com/',
      REWARDS_SANDBOX_CLIENT_ID: 'id',
      REWARDS_SANDBOX_CLIENT_SECRET: 'secret',
    });
    expect(config.mountSandbox).toBe(false);
    expect(config.rewards.sandbox).toMatchObject({ baseUrl: 'https://sandbox.example.com', embedded: false });
  });

  it('sends PKCE (S256) in every environment by default; each environment can opt out', () => {
    const production = {
      REWARDS_PRODUCTION_BASE_URL: 'https://rewards.example.com',
      REWARDS_PRODUCTION_CLIENT_ID: 'id',
      REWARDS_PRODUCTION_CLIENT_SECRET: 'secret',
    };
    const external = {
      REWARDS_SANDBOX_BASE_URL: 'https://sandbox.example.com',
      REWARDS_SANDBOX_CLIENT_ID: 'id',
      REWARDS_SANDBOX_CLIENT_SECRET: 'secret',
    };
    expect(readSettings({}).rewards.sandbox?.pkce).toBe(true);
    expect(readSettings(production).rewards.production?.pkce).toBe(true);
    expect(readSettings(external).rewards.sandbox?.pkce).toBe(true);
    expect(readSettings({ ...production, REWARDS_PRODUCTION_PKCE: 'false' }).rewards.production?.pkce).toBe(
      false,
    );
    expect(readSettings({ ...external, REWARDS_SANDBOX_PKCE: 'off' }).rewards.sandbox?.pkce).toBe(false);
    expect(readSettings({ REWARDS_SANDBOX_PKCE: 'false' }).rewards.sandbox?.pkce).toBe(false);
    expect(() => readSettings({ ...production, REWARDS_PRODUCTION_PKCE: 'maybe' })).toThrow(
      /REWARDS_PRODUCTION_PKCE must be true or false/,
    );
  });

  it('defaults to production when production is configured', () => {
    const config = readSettings({
      REWARDS_PRODUCTION_BASE_URL: 'https://rewards.example.com',
      REWARDS_PRODUCTION_CLIENT_ID: 'id',
      REWARDS_PRODUCTION_CLIENT_SECRET: 'secret',
    });
    expect(config.defaultEnvironment).toBe('production');
  });
});
