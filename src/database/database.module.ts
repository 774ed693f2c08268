import { Global, Module } from '@nestjs/common';
import { Database } from './database';
import { NotificationsService } from './notifications.service';

/** Postgres for every module: the process's pools (one connection budget) and cross-instance evictions. */
@Global()
@Module({
  providers: [Database, NotificationsService],
  exports: [Database, NotificationsService],
})
export class DatabaseModule {}
