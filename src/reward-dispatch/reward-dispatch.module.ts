import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { FieldsCacheModule } from '../fields-cache/fields-cache.module';
import { TenantsModule } from '../tenants/tenants.module';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { DispatchWorker } from './dispatch.worker';
import { RewardDispatchController } from './reward-dispatch.controller';
import { RewardDispatchService } from './reward-dispatch.service';
import { RewardListingService } from './reward-listing.service';

/** The send API, idempotency, dispatch records, the retry worker and reward listing. */
@Module({
  imports: [ScheduleModule.forRoot(), TenantsModule, TokenVaultModule, FieldsCacheModule],
  controllers: [RewardDispatchController],
  providers: [RewardDispatchService, RewardListingService, DispatchWorker],
  exports: [RewardDispatchService, DispatchWorker],
})
export class RewardDispatchModule {}
