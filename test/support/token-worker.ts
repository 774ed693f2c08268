/**
 * A separate OS process standing in for one gateway instance: its own AccessTokenProvider (own memory cache,
 * own single-flight, own pools) on the shared Postgres. The parent sends rounds; each round fires N concurrent
 * callers that need a token and use it on the sandbox API, retrying once through the vault on a 401.
 */
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { parseConfig } from '../../src/config/app-config';
import { Database } from '../../src/database/database';
import { RewardsApiClient } from '../../src/rewards-api/rewards-api.client';
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
const base = config.rewards.sandbox?.baseUrl as string;

async function oneCall(
  connectionId: string,
): Promise<{ status: number | string; token?: string; ms: number }> {
  const started = performance.now();
  try {
    let token = await provider.getAccessToken(connectionId);
    let res = await fetch(`${base}/api/v2/organizations`, {
      headers: { Authorization: `Bearer ${token.token}` },
    });
    if (res.status === 401) {
      token = await provider.afterUnauthorized(connectionId, token);
      res = await fetch(`${base}/api/v2/organizations`, {
        headers: { Authorization: `Bearer ${token.token}` },
      });
    }
    await res.arrayBuffer();
    return {
      status: res.status,
      token: createHash('sha256').update(token.token).digest('hex').slice(0, 16),
      ms: performance.now() - started,
    };
  } catch (error) {
    return { status: (error as { code?: string }).code ?? String(error), ms: performance.now() - started };
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
