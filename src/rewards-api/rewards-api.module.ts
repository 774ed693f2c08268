import { Global, Module } from '@nestjs/common';
import { RewardsApiClient } from './rewards-api.client';

/** The typed HTTP client of the rewards service (/oauth/token, /api/v2/...), error mapping and timeouts. */
@Global()
@Module({ providers: [RewardsApiClient], exports: [RewardsApiClient] })
export class RewardsApiModule {}
