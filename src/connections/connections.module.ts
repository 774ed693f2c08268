import { Global, Module } from '@nestjs/common';
import { PassportModule } from '@nestjs/passport';
import { configToken } from '../config/config.module';
import { REWARDS_ENVIRONMENTS, type RewardsConfig } from '../config/app-config';
import { TenantsModule } from '../tenants/tenants.module';
import { ConnectionStatus } from '../token-vault/access-token.provider';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { AlertsModule } from '../ops/alerts.module';
import { ConnectFlowController } from './connect-flow.controller';
import { ConnectionsController } from './connections.controller';
import { ConnectSessionStore } from './connect-session.store';
import { ConnectionStateStore } from './connection-state.store';
import { ConnectionActivationHooks } from './connection-activation';
import { PgStateStore } from './oauth-state.store';
import { ConnectionsService } from './connections.service';
import { AccountCheck } from './account-check.service';
import { ConnectionProbe } from './connection-probe.service';
import { oauthStrategy } from './rewards-oauth.strategies';
import { Retention } from '../retention/retention';
import { Database } from '../database/database';

/** The passport-oauth2 strategies of the configured environments (each registers itself with passport when built). */
const OAUTH_STRATEGIES = Symbol('OAUTH_STRATEGIES');
const CONNECTION_EVENTS_KEPT_DAYS = 90;

/** Global: the token vault writes a refresh's outcome through `ConnectionStatus` without importing this module. */
@Global()
@Module({
  providers: [ConnectionStateStore, { provide: ConnectionStatus, useExisting: ConnectionStateStore }],
  exports: [ConnectionStateStore, ConnectionStatus],
})
export class ConnectionStateModule {}

@Module({
  imports: [
    PassportModule.register({ session: false }),
    ConnectionStateModule,
    TenantsModule,
    TokenVaultModule,
    AlertsModule,
  ],
  controllers: [ConnectionsController, ConnectFlowController],
  providers: [
    ConnectionsService,
    AccountCheck,
    ConnectionProbe,
    ConnectSessionStore,
    ConnectionActivationHooks,
    PgStateStore,
    {
      provide: OAUTH_STRATEGIES,
      inject: [configToken('publicBaseUrl'), configToken('rewards'), PgStateStore],
      useFactory: (publicBaseUrl: string, config: RewardsConfig, states: PgStateStore) =>
        REWARDS_ENVIRONMENTS.flatMap((name) => {
          const env = config[name];
          return env ? [oauthStrategy(name, publicBaseUrl, env, states)] : [];
        }),
    },
  ],
  exports: [ConnectionsService, ConnectionProbe, ConnectionActivationHooks],
})
export class ConnectionsModule {
  constructor(
    retention: Retention,
    connections: ConnectionsService,
    sessions: ConnectSessionStore,
    states: PgStateStore,
    state: ConnectionStateStore,
    db: Database,
  ) {
    retention.onOffboard((tx, tenantId) => connections.offboard(tx, tenantId));
    const purges: [name: string, days: number, purge: (at: Date, limit: number) => Promise<number>][] = [
      // Kept after expiry: a late browser still sees "this link has expired", not "unknown".
      ['connect_sessions', 1, (at, limit) => sessions.purgeExpired(db.main, at, limit)],
      ['oauth_states', 1 / 24, (at, limit) => states.purgeExpired(at, limit)],
      [
        'connection_events',
        CONNECTION_EVENTS_KEPT_DAYS,
        (at, limit) => state.purgeOldEvents(db.main, at, limit),
      ],
    ];
    for (const [name, days, purge] of purges) retention.register({ name, days, purge });
  }
}
