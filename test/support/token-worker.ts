/**
 * A separate OS process standing in for one gateway instance: its own AccessTokenProvider (own memory cache,
 * own single-flight, own pools) on the shared Postgres. The parent sends rounds; each round fires N concurrent
 * callers that call the sandbox API as every module does — through a ConnectionClient, which reads the token as the
 * request leaves and takes the vault's verdict on a 401 — recording every token they were handed.
 */
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { parseConfig } from '../../src/config/app-config';
import { Database } from '../../src/database/database';
import { RewardsApiClient } from '../../src/rewards-api/rewards-api.client';
import { ConnectionClient, type TokenSource } from '../../src/rewards-api/connection-client';
import { AccessTokenProvider } from '../../src/token-vault/access-token.provider';
import { ConnectionStateStore } from '../../src/connections/connection-state.store';
import { GrantStore } from '../../src/token-vault/grant.store';
import { Vault } from '../../src/token-vault/vault.service';
import { terminate } from '../../src/common/terminate';

const config = parseConfig(JSON.parse(process.env.WORKER_ENV as string) as Record<string, string>);
const db = new Database(config.database);
const provider = new AccessTokenProvider(
  config.rewards,
  new Vault(config.vaultKeys),
  db,
  new RewardsApiClient(),
  new ConnectionStateStore(),
  new GrantStore(),
);
const api = new RewardsApiClient();
const hash = (token: string) => createHash('sha256').update(token).digest('hex').slice(0, 16);

async function oneCall(
  connectionId: string,
): Promise<{ status: number | string; tokens: string[]; ms: number }> {
  const started = performance.now();
  const tokens: string[] = [];
  const recording: TokenSource = {
    environmentOf: (id) => provider.environmentOf(id),
    getAccessToken: async (id) => {
      const token = await provider.getAccessToken(id);
      tokens.push(hash(token.token));
      return token;
    },
    unauthorized: (id, used, answeredAt, refusedBefore) =>
      provider.unauthorized(id, used, answeredAt, refusedBefore),
  };
  try {
    await new ConnectionClient(api, recording, config.rewards, connectionId).probe();
    return { status: 200, tokens, ms: performance.now() - started };
  } catch (error) {
    return {
      status: (error as { code?: string }).code ?? String(error),
      tokens,
      ms: performance.now() - started,
    };
  }
}

process.on('message', (msg: { connectionId: string; calls: number } | 'exit') => {
  if (msg === 'exit') {
    void db.close().then(() => terminate(0));
    return;
  }
  void Promise.all(Array.from({ length: msg.calls }, () => oneCall(msg.connectionId))).then((results) =>
    process.send?.(results),
  );
});
process.send?.('ready');
