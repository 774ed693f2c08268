import { Module } from '@nestjs/common';
import { ConnectionsModule } from '../connections/connections.module';
import { MetricsModule } from '../metrics/metrics.module';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { FieldsCacheController } from './fields-cache.controller';
import { FieldsCacheService } from './fields-cache.service';

/** The per-connection fields cache, label → id resolution and custom-field validation. */
@Module({
  imports: [MetricsModule, TokenVaultModule, ConnectionsModule],
  controllers: [FieldsCacheController],
  providers: [FieldsCacheService],
  exports: [FieldsCacheService],
})
export class FieldsCacheModule {}
