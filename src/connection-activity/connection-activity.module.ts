import { Global, Module } from '@nestjs/common';
import type { ActivityConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Retention } from '../retention/retention';
import { CallRecorder } from '../rewards-api/call-recorder';
import { ActivityController } from './activity.controller';
import { ActivityRecorder } from './activity.recorder';
import { ActivityStore } from './activity.store';

/** The connection activity; global so the rewards client and the vault get their `CallRecorder` without importing it. */
@Global()
@Module({
  controllers: [ActivityController],
  providers: [ActivityStore, ActivityRecorder, { provide: CallRecorder, useExisting: ActivityRecorder }],
  exports: [ActivityStore, ActivityRecorder, CallRecorder],
})
export class ConnectionActivityModule {
  constructor(@InjectConfig('activity') config: ActivityConfig, retention: Retention, store: ActivityStore) {
    retention.register({
      name: 'connection_activity',
      days: config.retentionDays,
      purge: (olderThan, limit) => store.purgeOlderThan(olderThan, limit),
      purgeTenant: (id, limit) => store.purgeTenant(id, limit),
    });
  }
}
