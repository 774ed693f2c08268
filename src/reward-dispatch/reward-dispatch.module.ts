import { Module } from '@nestjs/common';
import type { RetentionConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Retention } from '../retention/retention';
import { ConnectionsModule } from '../connections/connections.module';
import { FieldsCacheModule } from '../fields-cache/fields-cache.module';
import { RewardsApiModule } from '../rewards-api/rewards-api.module';
import { TenantsModule } from '../tenants/tenants.module';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { ApprovalReconciler } from './approval.reconciler';
import { DispatchSender } from './dispatch.sender';
import { DispatchStore } from './dispatch.store';
import { DispatchWorker } from './dispatch.worker';
import { RewardDispatchController } from './reward-dispatch.controller';
import { RewardDispatchService } from './reward-dispatch.service';
import { RewardListingService } from './reward-listing.service';

/** The send API, idempotency, dispatch records, the retry worker, the approval reconciliation and reward listing. */
@Module({
  imports: [TenantsModule, TokenVaultModule, ConnectionsModule, FieldsCacheModule, RewardsApiModule],
  controllers: [RewardDispatchController],
  providers: [
    DispatchStore,
    DispatchSender,
    RewardDispatchService,
    RewardListingService,
    DispatchWorker,
    ApprovalReconciler,
  ],
  exports: [RewardDispatchService, DispatchWorker, ApprovalReconciler, DispatchStore],
})
export class RewardDispatchModule {
  constructor(
    @InjectConfig('retention') config: RetentionConfig,
    retention: Retention,
    store: DispatchStore,
  ) {
    // Deletion first: what is deleted need not be redacted.
    retention.register({
      name: 'reward_dispatches',
      days: config.dispatchDays,
      purge: (olderThan, limit) => store.expire(olderThan, limit),
      purgeTenant: (id, limit) => store.purgeTenant(id, limit),
    });
    retention.register({
      name: 'recipient_data',
      days: config.recipientDataDays,
      purge: (olderThan, limit) => store.redact(olderThan, limit),
    });
  }
}
