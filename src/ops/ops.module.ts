import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { TenantWebhooksModule } from '../tenant-webhooks/tenant-webhooks.module';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { AlertsModule } from './alerts.module';
import { ConnectionsModule } from '../connections/connections.module';
import { DashboardController } from './dashboard.controller';
import { HealthController } from './health.controller';
import { HomeController } from './home.controller';
import { OpsController } from './ops.controller';
import { OpsScheduler } from './ops.scheduler';
import { OpsService } from './ops.service';

@Module({
  imports: [
    TerminusModule.forRoot({ logger: false, errorLogStyle: 'json' }),
    TokenVaultModule,
    TenantWebhooksModule,
    ConnectionsModule,
    AlertsModule,
  ],
  controllers: [HomeController, HealthController, OpsController, DashboardController],
  providers: [OpsService, OpsScheduler],
  exports: [OpsService, AlertsModule],
})
export class OpsModule {}
