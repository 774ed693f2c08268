import { Module, type Provider } from '@nestjs/common';
import { PassportModule } from '@nestjs/passport';
import type { AppConfig } from '../config/app-config';
import { TenantsModule } from '../tenants/tenants.module';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { ConnectFlowController } from './connect-flow.controller';
import { ConnectionsController } from './connections.controller';
import { ConnectSessionStore } from './connect-session.store';
import { HousekeepingService } from './housekeeping.service';
import { PgStateStore } from './oauth-state.store';
import { ConnectionsService } from './connections.service';
import { ProductionOAuthStrategy, SandboxOAuthStrategy } from './rewards-oauth.strategies';

/** Connect sessions, the OAuth authorization-code flow (passport-oauth2, one strategy per environment), the callback. */
@Module({})
export class ConnectionsModule {
  static forRoot(config: AppConfig) {
    const strategies: Provider[] = [];
    if (config.rewards.sandbox) strategies.push(SandboxOAuthStrategy);
    if (config.rewards.production) strategies.push(ProductionOAuthStrategy);
    return {
      module: ConnectionsModule,
      global: true,
      imports: [PassportModule.register({ session: false }), TenantsModule, TokenVaultModule],
      controllers: [ConnectionsController, ConnectFlowController],
      providers: [ConnectionsService, ConnectSessionStore, PgStateStore, HousekeepingService, ...strategies],
      exports: [ConnectionsService, HousekeepingService],
    };
  }
}
