import { Module } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { RewardsApiModule } from '../rewards-api/rewards-api.module';
import { AccessTokenProvider } from './access-token.provider';
import { RewardsApi } from './rewards-api.service';

/**
 * Encrypted grant storage, the AccessTokenProvider with the cross-process refresh lock, and `RewardsApi`: the
 * connection-scoped upstream client that takes its tokens from here.
 */
@Module({ imports: [MetricsModule, RewardsApiModule], providers: [AccessTokenProvider, RewardsApi], exports: [AccessTokenProvider, RewardsApi] })
export class TokenVaultModule {}
