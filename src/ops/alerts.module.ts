import { Module } from '@nestjs/common';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { Retention } from '../retention/retention';
import { AlertsService } from './alerts.service';

export const ALERTS_KEPT_DAYS = 30;

/** Alerts on their own: connections raise one (a re-consent refused) without depending on the rest of ops. */
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
