import { Module } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { RewardsApiModule } from '../rewards-api/rewards-api.module';
import { AccessTokenProvider } from './access-token.provider';
import { AppCredentialsStore } from './app-credentials.store';
import { GrantStore } from './grant.store';
import { RewardsApi } from './rewards-api.service';
import { VaultModule } from './vault.module';

/**
 * Encrypted grant storage, the AccessTokenProvider with the cross-process refresh lock, and `RewardsApi`: the
 * connection-scoped upstream client that takes its tokens from here. Exports the vault itself (VaultModule).
 */
@Module({
  imports: [MetricsModule, RewardsApiModule, VaultModule],
  providers: [AccessTokenProvider, RewardsApi, GrantStore, AppCredentialsStore],
  exports: [AccessTokenProvider, RewardsApi, GrantStore, AppCredentialsStore, VaultModule],
})
export class TokenVaultModule {}
