import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { OpsConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { AlertsService } from './alerts.service';
import { OpsService } from './ops.service';
import { OnePass, runEvery, runEverySpread } from '../common/schedule';

const ALERT_INTERVAL_MS = 2_000;

/** Background work of ops on every instance (each step claims its rows): alerts, idle probes, the gauge snapshot. */
@Injectable()
export class OpsScheduler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(OpsScheduler.name);
  private readonly alertPass = new OnePass();

  constructor(
    @InjectConfig('ops') private readonly config: OpsConfig,
    private readonly ops: OpsService,
    private readonly alerts: AlertsService,
    private readonly scheduler: SchedulerRegistry,
  ) {}

  onApplicationBootstrap(): void {
    this.ops.gauges.start(this.scheduler);
    runEvery(this.scheduler, 'ops-alerts', ALERT_INTERVAL_MS, () => void this.runAlerts());
    if (this.config.probeIntervalMs > 0) {
      runEverySpread(this.scheduler, 'ops-probes', this.config.probeIntervalMs, () => {
        void this.ops.probeIdle().catch((e: unknown) => this.logger.warn(`probe pass: ${String(e)}`));
      });
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.ops.gauges.stop(this.scheduler);
  }

  runAlerts(): Promise<number> {
    return this.alertPass
      .run(async () => (await this.alerts.detectTransitions()) + (await this.alerts.deliverDue()))
      .catch((error: unknown) => {
        this.logger.warn(`alert pass: ${error instanceof Error ? error.message : String(error)}`);
        return 0;
      });
  }
}
