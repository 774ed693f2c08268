import { Module } from '@nestjs/common';
import { AccessTokenProvider } from './access-token.provider';
import { RewardsApi } from './rewards-api.service';

/**
 * Encrypted grant storage, the AccessTokenProvider with the cross-process refresh lock, and `RewardsApi`: the
 * connection-scoped upstream client that takes its tokens from here.
 */
@Module({ providers: [AccessTokenProvider, RewardsApi], exports: [AccessTokenProvider, RewardsApi] })
export class TokenVaultModule {}
