import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { appDataSourceOptions } from './data-source';
import { NotificationsService } from './notifications.service';
import { RelaxedPool } from './relaxed-pool';

/** Postgres for every module: TypeORM's data source (the main pool of the budget) and cross-instance evictions. */
@Global()
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => {
        if (!config.databaseUrl) throw new Error('databaseUrl must be resolved before the app starts');
        return {
          ...appDataSourceOptions({ url: config.databaseUrl, maxConnections: config.databaseMaxConnections }),
          retryAttempts: 3,
          retryDelay: 1000,
        };
      },
    }),
  ],
  providers: [NotificationsService, RelaxedPool],
  exports: [NotificationsService, RelaxedPool],
})
export class DatabaseModule {}
