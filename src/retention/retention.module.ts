import { Global, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Retention, RetentionJob } from './retention';

/**
 * Retention (global, like the database): the one list of age purges, tenant purge steps and offboarding hooks every
 * module registers into, and the job that runs them.
 */
@Global()
@Module({
  imports: [ScheduleModule.forRoot()],
  providers: [Retention, RetentionJob],
  exports: [Retention, RetentionJob],
})
export class RetentionModule {}
