import { Global, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Retention, RetentionJob } from './retention';

/** Global, like the database: every module registers its purges. */
@Global()
@Module({
  imports: [ScheduleModule.forRoot()],
  providers: [Retention, RetentionJob],
  exports: [Retention, RetentionJob],
})
export class RetentionModule {}
