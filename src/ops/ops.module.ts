import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller';

/** Ops: health now; connection health, metrics, alerts and the dashboard join here. */
@Module({
  imports: [TerminusModule.forRoot({ logger: false, errorLogStyle: 'json' })],
  controllers: [HealthController],
})
export class OpsModule {}
