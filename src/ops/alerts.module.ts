import { Module } from '@nestjs/common';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { AlertsService } from './alerts.service';

/**
 * Ops alerts on their own, so that the module where an alert-worthy event happens (connections: a re-consent refused)
 * can raise it in its own transaction without depending on the rest of ops.
 */
@Module({
  imports: [TokenVaultModule],
  providers: [AlertsService],
  exports: [AlertsService],
})
export class AlertsModule {}
