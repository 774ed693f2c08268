import { Module } from '@nestjs/common';
import { RewardsApiModule } from '../rewards-api/rewards-api.module';
import { AccessTokenProvider } from './access-token.provider';
import { AppCredentialsStore } from './app-credentials.store';
import { RewardsApi } from './rewards-api.service';
import { VaultModule } from './vault.module';

/** Grant storage, the access tokens with the cross-process refresh lock, and the connection-scoped `RewardsApi`. */
@Module({
  imports: [RewardsApiModule, VaultModule],
  providers: [AccessTokenProvider, RewardsApi, AppCredentialsStore],
  exports: [AccessTokenProvider, RewardsApi, AppCredentialsStore, VaultModule],
})
export class TokenVaultModule {}
