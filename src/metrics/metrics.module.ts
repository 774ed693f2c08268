import { Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';

/**
 * Prometheus metrics (prom-client): the lowest floor of the module graph — every module may record into it, it
 * depends on none. Not global: modules that record import it.
 */
@Module({ providers: [MetricsService], exports: [MetricsService] })
export class MetricsModule {}
