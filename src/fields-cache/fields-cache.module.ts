import { Module } from '@nestjs/common';
import { ConnectionsModule } from '../connections/connections.module';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { FieldsCacheController } from './fields-cache.controller';
import { FieldsCacheService } from './fields-cache.service';
import { Retention } from '../retention/retention';

/** A cached copy not reloaded for this long is deleted; the next use reloads it. */
export const FIELDS_KEPT_DAYS = 30;

@Module({
  imports: [TokenVaultModule, ConnectionsModule],
  controllers: [FieldsCacheController],
  providers: [FieldsCacheService],
  exports: [FieldsCacheService],
})
export class FieldsCacheModule {
  constructor(retention: Retention, fields: FieldsCacheService) {
    retention.register({
      name: 'fields_cache',
      days: FIELDS_KEPT_DAYS,
      purge: (olderThan, limit) => fields.purgeStale(olderThan, limit),
    });
  }
}
