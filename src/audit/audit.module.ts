import { Global, Module } from '@nestjs/common';
import { AuditController } from './audit.controller';
import { AuditLog } from './audit-log.service';
import { AuditStore } from './audit.store';
import type { AuditConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Retention } from '../retention/retention';

/** The audit trail; global, so that every module that makes changes has `AuditLog`. */
@Global()
@Module({
  controllers: [AuditController],
  providers: [AuditStore, AuditLog],
  exports: [AuditLog, AuditStore],
})
export class AuditModule {
  constructor(@InjectConfig('audit') config: AuditConfig, retention: Retention, store: AuditStore) {
    retention.register({
      name: 'audit_events',
      days: config.retentionDays,
      purge: (olderThan, limit) => store.purgeOlderThan(olderThan, limit),
    });
  }
}
