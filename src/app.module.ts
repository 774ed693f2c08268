import type { DynamicModule } from '@nestjs/common';
import { Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { LoggerModule } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import type { AppConfig } from './config/app-config';
import { configProviders } from './config/config.module';
import { Clock, systemClock } from './common/clock';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { loggerParams } from './common/logging';
import { AuditModule } from './audit/audit.module';
import { ConnectionActivityModule } from './connection-activity/connection-activity.module';
import { Database } from './database/database';
import { NotificationsService } from './database/notifications.service';
import { Retention, RetentionJob } from './retention/retention';
import { ConnectionsModule } from './connections/connections.module';
import { DeliveryWebhooksModule } from './delivery-webhooks/delivery-webhooks.module';
import { FieldsCacheModule } from './fields-cache/fields-cache.module';
import { MetricsService } from './metrics/metrics.service';
import { OpsModule } from './ops/ops.module';
import { RewardDispatchModule } from './reward-dispatch/reward-dispatch.module';
import { TenantWebhooksModule } from './tenant-webhooks/tenant-webhooks.module';
import { TokenVaultModule } from './token-vault/token-vault.module';
import { TenantsModule } from './tenants/tenants.module';

export interface AppModuleOptions {
  /** Where structured logs go (tests capture them to prove no secret is logged). Default: stdout. */
  logDestination?: DestinationStream;
  /** The clock every module reads time from (tests move one). Default: the system clock. */
  clock?: Clock;
}

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, options: AppModuleOptions = {}): DynamicModule {
    // Global: every module injects the configuration's slices (InjectConfig) and the Clock, Postgres (the process's
    // pools and cross-instance evictions), the metrics, and retention (each module registers its purges).
    const global = [
      ...configProviders(config),
      { provide: Clock, useValue: options.clock ?? systemClock },
      Database,
      NotificationsService,
      MetricsService,
      Retention,
      RetentionJob,
    ];
    return {
      module: AppModule,
      global: true,
      imports: [
        LoggerModule.forRoot(loggerParams(config.logLevel, options.logDestination)),
        ScheduleModule.forRoot(),
        AuditModule,
        ConnectionActivityModule,
        TenantsModule,
        TokenVaultModule,
        ConnectionsModule,
        FieldsCacheModule,
        RewardDispatchModule,
        DeliveryWebhooksModule,
        TenantWebhooksModule,
        OpsModule,
      ],
      providers: [...global, { provide: APP_FILTER, useClass: HttpExceptionFilter }],
      exports: global,
    };
  }
}
