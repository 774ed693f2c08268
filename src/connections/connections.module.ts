import { Global, Module } from '@nestjs/common';
import { PassportModule } from '@nestjs/passport';
import { configToken } from '../config/config.module';
import type { RewardsConfig } from '../config/app-config';
import { TenantsModule } from '../tenants/tenants.module';
import { ConnectionStatus } from '../token-vault/access-token.provider';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { AlertsModule } from '../ops/alerts.module';
import { ConnectFlowController } from './connect-flow.controller';
import { ConnectionsController } from './connections.controller';
import { ConnectSessionStore } from './connect-session.store';
import { ConnectionStateStore } from './connection-state.store';
import { ConnectionActivationHooks } from './connection-activation';
import { HousekeepingService } from './housekeeping.service';
import { PgStateStore } from './oauth-state.store';
import { ConnectionsService } from './connections.service';
import { AccountCheck } from './account-check.service';
import { ConnectionProbe } from './connection-probe.service';
import { ProductionOAuthStrategy, SandboxOAuthStrategy } from './rewards-oauth.strategies';
import { Retention } from '../retention/retention';

/** The passport-oauth2 strategies of the configured environments (each registers itself with passport when built). */
export const OAUTH_STRATEGIES = Symbol('OAUTH_STRATEGIES');

/** Global: the token vault writes a refresh's outcome through `ConnectionStatus` without importing this module. */
@Global()
@Module({
  providers: [ConnectionStateStore, { provide: ConnectionStatus, useExisting: ConnectionStateStore }],
  exports: [ConnectionStateStore, ConnectionStatus],
})
export class ConnectionStateModule {}

/** Connect sessions, the OAuth authorization-code flow (passport-oauth2, one strategy per environment), the callback. */
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
    HousekeepingService,
    {
      provide: OAUTH_STRATEGIES,
      inject: [configToken('publicBaseUrl'), configToken('rewards'), PgStateStore],
      useFactory: (publicBaseUrl: string, { sandbox, production }: RewardsConfig, states: PgStateStore) => [
        ...(sandbox ? [new SandboxOAuthStrategy(publicBaseUrl, sandbox, states)] : []),
        ...(production ? [new ProductionOAuthStrategy(publicBaseUrl, production, states)] : []),
      ],
    },
  ],
  exports: [ConnectionsService, ConnectionProbe, HousekeepingService, ConnectionActivationHooks],
})
export class ConnectionsModule {
  constructor(retention: Retention, connections: ConnectionsService) {
    retention.onOffboard((tx, tenantId) => connections.offboard(tx, tenantId));
  }
}
