import { Module } from '@nestjs/common';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { Retention } from '../retention/retention';
import { AlertsService } from './alerts.service';

/** Alerts (delivered or not) are kept this long. */
export const ALERTS_KEPT_DAYS = 30;

/**
 * Ops alerts on their own, so that the module where an alert-worthy event happens (connections: a re-consent refused)
 * can raise it in its own transaction without depending on the rest of ops.
 */
@Module({
  imports: [TokenVaultModule],
  providers: [AlertsService],
  exports: [AlertsService],
})
export class AlertsModule {
  constructor(retention: Retention, alerts: AlertsService) {
    retention.register({
      name: 'ops_alerts',
      days: ALERTS_KEPT_DAYS,
      purge: (olderThan, limit) => alerts.purgeOlderThan(olderThan, limit),
    });
  }
}
