/** One "gateway instance" of the refresh storm: its own AccessTokenProvider on the shared Postgres. */
import 'reflect-metadata';
import { parseConfig } from '../src/config/app-config';
import { ConnectionClient } from '../src/rewards-api/connection-client';
import { Database } from '../src/database/database';
import { RewardsApiClient } from '../src/rewards-api/rewards-api.client';
import { AccessTokenProvider } from '../src/token-vault/access-token.provider';
import { ConnectionStateStore } from '../src/connections/connection-state.store';
import { GrantStore } from '../src/token-vault/grant.store';
import { Vault } from '../src/token-vault/vault.service';
import { systemClock } from '../src/common/clock';

const config = parseConfig(JSON.parse(process.env.WORKER_ENV as string) as Record<string, string>);
const api = new RewardsApiClient(systemClock);
const db = new Database(config.database);
const provider = new AccessTokenProvider(
  config.rewards,
  db,
  api,
  new ConnectionStateStore(),
  new GrantStore(new Vault(config.vaultKeys)),
  systemClock,
);

async function call(connectionId: string): Promise<{ status: number | string; ms: number }> {
  const started = performance.now();
  try {
    // As every module does: through a ConnectionClient, which reads the token as the request leaves.
    await new ConnectionClient(api, provider, config.rewards, connectionId, systemClock).probe();
    return { status: 200, ms: performance.now() - started };
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
