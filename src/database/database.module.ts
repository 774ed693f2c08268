import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { appDataSourceOptions } from './data-source';

@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => {
        if (!config.databaseUrl) throw new Error('databaseUrl must be resolved before the app starts');
        return { ...appDataSourceOptions({ url: config.databaseUrl, maxConnections: config.databaseMaxConnections }), retryAttempts: 3, retryDelay: 1000 };
      },
    }),
  ],
})
export class DatabaseModule {}
