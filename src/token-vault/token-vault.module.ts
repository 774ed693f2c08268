import { Module } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { RewardsApiModule } from '../rewards-api/rewards-api.module';
import { AccessTokenProvider } from './access-token.provider';
import { AppCredentialsStore } from './app-credentials.store';
import { GrantStore } from './grant.store';
import { RewardsApi } from './rewards-api.service';
import { VaultCanary } from './vault-canary';

/**
 * Encrypted grant storage, the AccessTokenProvider with the cross-process refresh lock, and `RewardsApi`: the
 * connection-scoped upstream client that takes its tokens from here. The vault canary: the keys are checked against
 * the data before the app listens.
 */
@Module({
  imports: [MetricsModule, RewardsApiModule],
  providers: [AccessTokenProvider, RewardsApi, GrantStore, AppCredentialsStore, VaultCanary],
  exports: [AccessTokenProvider, RewardsApi, GrantStore, AppCredentialsStore, VaultCanary],
})
export class TokenVaultModule {}
