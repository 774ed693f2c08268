import { Module } from '@nestjs/common';
import { AccountPacer } from './account-pacer';
import { RewardsApiClient } from './rewards-api.client';
import { Retention } from '../retention/retention';

/** An account's pacing state not used for this long is deleted. */
const PACE_KEPT_DAYS = 7;

@Module({
  providers: [RewardsApiClient, AccountPacer],
  exports: [RewardsApiClient, AccountPacer],
})
export class RewardsApiModule {
  constructor(retention: Retention, pacer: AccountPacer) {
    retention.register({
      name: 'account_pace',
      days: PACE_KEPT_DAYS,
      purge: (olderThan, limit) => pacer.purgeIdle(olderThan, limit),
    });
  }
}
