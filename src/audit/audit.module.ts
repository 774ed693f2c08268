import { Global, Module } from '@nestjs/common';
import { AuditController } from './audit.controller';
import { AuditLog } from './audit-log.service';
import { AuditService } from './audit.service';
import { AuditStore } from './audit.store';

/**
 * The audit trail (`audit_events`): `AuditLog.record` for every module that makes changes (global, like the
 * database), the listings, and the store with its retention purge.
 */
@Global()
@Module({
  controllers: [AuditController],
  providers: [AuditStore, AuditLog, AuditService],
  exports: [AuditLog, AuditStore],
})
export class AuditModule {}
