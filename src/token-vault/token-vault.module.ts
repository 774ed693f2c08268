import { Module } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { RewardsApiModule } from '../rewards-api/rewards-api.module';
import { AccessTokenProvider } from './access-token.provider';
import { AppCredentialsStore } from './app-credentials.store';
import { ConnectionStateStore } from './connection-state.store';
import { GrantStore } from './grant.store';
import { RewardsApi } from './rewards-api.service';

/**
 * Encrypted grant storage, the AccessTokenProvider with the cross-process refresh lock, and `RewardsApi`: the
 * connection-scoped upstream client that takes its tokens from here.
 */
@Module({
  imports: [MetricsModule, RewardsApiModule],
  providers: [AccessTokenProvider, RewardsApi, ConnectionStateStore, GrantStore, AppCredentialsStore],
  exports: [AccessTokenProvider, RewardsApi, ConnectionStateStore, GrantStore, AppCredentialsStore],
})
export class TokenVaultModule {}
