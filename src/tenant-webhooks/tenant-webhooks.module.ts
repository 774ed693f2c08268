import { Module } from '@nestjs/common';
import { VaultModule } from '../token-vault/vault.module';
import { TenantWebhooksController } from './tenant-webhooks.controller';
import { WebhookStore } from './webhook.store';
import { Retention } from '../retention/retention';
import { OUTBOX_KEPT_DAYS, WebhookWorker } from './webhook.worker';

/**
 * Tenant webhooks: endpoints, the outbox and its delivery worker. Events are queued by the modules whose changes they
 * describe, in their own transactions (`enqueueEvents` / `outboxInsert` need no injection).
 */
@Module({
  imports: [VaultModule],
  controllers: [TenantWebhooksController],
  providers: [WebhookStore, WebhookWorker],
  exports: [WebhookStore, WebhookWorker],
})
export class TenantWebhooksModule {
  constructor(retention: Retention, store: WebhookStore) {
    retention.register({
      name: 'webhook_outbox',
      days: OUTBOX_KEPT_DAYS,
      purge: (olderThan, limit) => store.purgeOld(olderThan, limit),
      purgeTenant: (id, limit) => store.purgeTenant(id, limit),
    });
  }
}
