import { Module } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { AccountPacer } from './account-pacer';
import { RewardsApiClient } from './rewards-api.client';

/** The typed HTTP client of the rewards service (/oauth/token, /api/v2/...), error mapping and timeouts, and the per-account pacer. */
@Module({
  imports: [MetricsModule],
  providers: [RewardsApiClient, AccountPacer],
  exports: [RewardsApiClient, AccountPacer],
})
export class RewardsApiModule {}
