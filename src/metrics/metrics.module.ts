import { Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';

/** The lowest floor of the module graph: every module may record into it, it depends on none. */
@Module({ providers: [MetricsService], exports: [MetricsService] })
export class MetricsModule {}
