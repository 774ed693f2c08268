import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import type { Pool } from 'pg';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { createPool } from './pg-pools';

/**
 * The `relaxed` pool of the connection budget, shared by the process: its sessions commit asynchronously (no wait
 * for the WAL flush). For writes whose loss in a crash is harmless — a reward's progress that a retry re-learns from
 * the rewards service, an account's pacing slot — where the flush wait would only add latency and jitter.
 */
@Injectable()
export class RelaxedPool implements OnModuleDestroy {
  private readonly logger = new Logger(RelaxedPool.name);
  readonly pool: Pool;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.pool = createPool(
      { url: config.databaseUrl as string, maxConnections: config.databaseMaxConnections },
      'relaxed',
    );
    this.pool.on('error', (error) => this.logger.warn(`relaxed pool: ${error.message}`));
  }

  async onModuleDestroy(): Promise<void> {
    await this.pool.end();
  }
}
