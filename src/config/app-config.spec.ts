import { randomBytes } from 'node:crypto';
import { ConfigValidationError, parseConfig } from './app-config';

const key = () => randomBytes(32).toString('base64');

describe('parseConfig', () => {
  it('runs with no variables at all: embedded database, built-in sandbox, port 3000', () => {
    const config = parseConfig({}, '/srv/app');
    expect(config.port).toBe(3000);
    expect(config.publicBaseUrl).toBe('http://localhost:3000');
    expect(config.databaseUrl).toBeUndefined();
    expect(config.dataDir).toBe('/srv/app/.data');
    expect(config.mountSandbox).toBe(true);
    expect(config.rewards.sandbox?.baseUrl).toBe('http://localhost:3000/sandbox');
    expect(config.defaultEnvironment).toBe('sandbox');
    expect(config.logLevel).toBe('info');
  });

  it('lists every problem at once', () => {
    let error: unknown;
    try {
      parseConfig({
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
    expect(() => parseConfig({ DATABASE_URL: 'postgres://h/db' })).toThrow(/VAULT_KEYS is required/);
    const config = parseConfig({ DATABASE_URL: 'postgres://h/db', VAULT_KEYS: `new:${key()}, old:${key()}` });
    expect(config.vaultKeys.map((k) => k.id)).toEqual(['new', 'old']);
    expect(() => parseConfig({ VAULT_KEYS: `a:${key()},a:${key()}` })).toThrow(/appears twice/);
  });

  it('uses a configured sandbox host instead of the built-in one, with its credentials required', () => {
    expect(() => parseConfig({ REWARDS_SANDBOX_BASE_URL: 'https://sandbox.example.com' })).toThrow(
      /REWARDS_SANDBOX_CLIENT_ID/,
    );
    const config = parseConfig({
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
    expect(parseConfig({}).rewards.sandbox?.pkce).toBe(true);
    expect(parseConfig(production).rewards.production?.pkce).toBe(true);
    expect(parseConfig(external).rewards.sandbox?.pkce).toBe(true);
    expect(parseConfig({ ...production, REWARDS_PRODUCTION_PKCE: 'false' }).rewards.production?.pkce).toBe(
      false,
    );
    expect(parseConfig({ ...external, REWARDS_SANDBOX_PKCE: 'off' }).rewards.sandbox?.pkce).toBe(false);
    expect(parseConfig({ REWARDS_SANDBOX_PKCE: 'false' }).rewards.sandbox?.pkce).toBe(false);
    expect(() => parseConfig({ ...production, REWARDS_PRODUCTION_PKCE: 'maybe' })).toThrow(
      /REWARDS_PRODUCTION_PKCE must be true or false/,
    );
  });

  it('defaults to production when production is configured', () => {
    const config = parseConfig({
      REWARDS_PRODUCTION_BASE_URL: 'https://rewards.example.com',
      REWARDS_PRODUCTION_CLIENT_ID: 'id',
      REWARDS_PRODUCTION_CLIENT_SECRET: 'secret',
    });
    expect(config.defaultEnvironment).toBe('production');
  });
});
