import { Module } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { RewardsApiClient } from './rewards-api.client';

/** The typed HTTP client of the rewards service (/oauth/token, /api/v2/...), error mapping and timeouts. */
@Module({ imports: [MetricsModule], providers: [RewardsApiClient], exports: [RewardsApiClient] })
export class RewardsApiModule {}
