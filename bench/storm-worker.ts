/** One "gateway instance" of the refresh storm: its own AccessTokenProvider on the shared Postgres. */
import 'reflect-metadata';
import { parseConfig, type RewardsEnvironmentConfig } from '../src/config/app-config';
import { Database } from '../src/database/database';
import { RewardsApiClient } from '../src/rewards-api/rewards-api.client';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import { ConnectionStateStore } from '../src/connections/connection-state.store';
import { GrantStore } from '../src/token-vault/grant.store';
import { Vault } from '../src/token-vault/vault.service';

const config = parseConfig(JSON.parse(process.env.WORKER_ENV as string) as Record<string, string>);
const api = new RewardsApiClient();
const db = new Database(config.database);
const provider = new AccessTokenProvider(
  config.rewards,
  new Vault(config.vaultKeys),
  db,
  api,
  new ConnectionStateStore(),
  new GrantStore(),
);
const env = config.rewards.sandbox as RewardsEnvironmentConfig;

async function call(connectionId: string): Promise<{ status: number | string; ms: number }> {
  const started = performance.now();
  try {
    // As every module does: through withToken, which retries once on a 401 with a newer or refreshed token.
    const res = await provider.withToken(connectionId, (token) =>
      api.call(env, token.token, 'GET', '/organizations'),
    );
    return { status: res.status, ms: performance.now() - started };
  } catch (error) {
    return { status: (error as { code?: string }).code ?? String(error), ms: performance.now() - started };
  }
}

process.on('message', (msg: { connectionId: string; calls: number; force?: boolean } | 'exit') => {
  if (msg === 'exit') {
    void db.close().then(() => process.exit(0));
    return;
  }
  if (msg.force) {
    void provider.forceRefresh(msg.connectionId).then(
      () => process.send?.([]),
      () => process.send?.([]),
    );
    return;
  }
  void Promise.all(Array.from({ length: msg.calls }, () => call(msg.connectionId))).then((r) =>
    process.send?.(r),
  );
});
process.send?.('ready');
