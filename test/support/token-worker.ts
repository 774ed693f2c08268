/**
 * A separate OS process standing in for one gateway instance: its own AccessTokenProvider (own memory cache,
 * own single-flight, own pools) on the shared Postgres. The parent sends rounds; each round fires N concurrent
 * callers that need a token at the same time (status 200: handed a token within its usable window), then one call
 * through a ConnectionClient — as every module calls the service: the token read as the request leaves, a 401 judged
 * by the vault — shows the vault's token works. Callers do not hold their token across a queue of a thousand requests
 * to the sandbox: how long that queue takes depends on the machine, not on the refresh protocol under test.
 */
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { parseConfig } from '../../src/config/app-config';
import { Database } from '../../src/database/database';
import { RewardsApiClient } from '../../src/rewards-api/rewards-api.client';
import { ConnectionClient, type TokenSource } from '../../src/rewards-api/connection-client';
import type { CallResult } from './workers';
import { AccessTokenProvider } from '../../src/token-vault/access-token.provider';
import { ConnectionStateStore } from '../../src/connections/connection-state.store';
import { GrantStore } from '../../src/token-vault/grant.store';
import { Vault } from '../../src/token-vault/vault.service';
import { terminate } from '../../src/common/terminate';
import { systemClock } from '../../src/common/clock';

const config = parseConfig(JSON.parse(process.env.WORKER_ENV as string) as Record<string, string>);
const db = new Database(config.database);
const provider = new AccessTokenProvider(
  config.rewards,
  db,
  new RewardsApiClient(systemClock),
  new ConnectionStateStore(),
  new GrantStore(new Vault(config.vaultKeys)),
  systemClock,
);
const api = new RewardsApiClient(systemClock);
const hash = (token: string) => createHash('sha256').update(token).digest('hex').slice(0, 16);

async function oneCall(connectionId: string): Promise<CallResult> {
  const started = performance.now();
  try {
    const token = await provider.getAccessToken(connectionId);
    const usable = token.refreshAt > Date.now();
    return { status: usable ? 200 : 'stale', tokens: [hash(token.token)], ms: performance.now() - started };
  } catch (error) {
    return {
      status: (error as { code?: string }).code ?? String(error),
      tokens: [],
      ms: performance.now() - started,
    };
  }
}

/** One call of the service through a ConnectionClient, recording the tokens it was handed. */
async function probe(connectionId: string): Promise<CallResult> {
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
    await new ConnectionClient(api, recording, config.rewards, connectionId, systemClock).probe();
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
  void Promise.all(Array.from({ length: msg.calls }, () => oneCall(msg.connectionId)))
    .then(async (callers) => ({ callers, probe: await probe(msg.connectionId) }))
    .then((round) => process.send?.(round));
});
process.send?.('ready');
