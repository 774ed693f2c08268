import { Global, Module } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { CallRecorder } from '../rewards-api/call-recorder';
import { ActivityController } from './activity.controller';
import { ActivityRecorder } from './activity.recorder';
import { ActivityService } from './activity.service';
import { ActivityStore } from './activity.store';

/**
 * The connection activity (`connection_activity`): the recorder the rewards client and the vault report every request
 * to (as `CallRecorder`, global so that they need not import this module), its buffer and store, the tenant's listing.
 */
@Global()
@Module({
  imports: [MetricsModule],
  controllers: [ActivityController],
  providers: [
    ActivityStore,
    ActivityRecorder,
    ActivityService,
    { provide: CallRecorder, useExisting: ActivityRecorder },
  ],
  exports: [ActivityStore, ActivityRecorder, CallRecorder],
})
export class ConnectionActivityModule {}
