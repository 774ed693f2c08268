import { Module } from '@nestjs/common';
import { ConnectionsModule } from '../connections/connections.module';
import { RewardDispatchModule } from '../reward-dispatch/reward-dispatch.module';
import { TokenVaultModule } from '../token-vault/token-vault.module';
import { Retention } from '../retention/retention';
import { DeliveryReconciler, EVENTS_KEPT_DAYS } from './delivery-reconciler';
import { DeliveryWebhookIntake } from './delivery-webhook.intake';
import { WebhookEventStore } from './webhook-event.store';
import { WebhookKeyStore } from './webhook-key.store';
import { WebhookRegistrar } from './webhook-registrar';

/**
 * The rewards service's delivery webhooks: registration per connection, the signed receiver and the reconciliation of
 * missed events. Outcomes are written through `DispatchStore.recordDelivery` (reward-dispatch owns those rows).
 */
@Module({
  imports: [TokenVaultModule, ConnectionsModule, RewardDispatchModule],
  controllers: [DeliveryWebhookIntake],
  providers: [WebhookEventStore, WebhookKeyStore, WebhookRegistrar, DeliveryReconciler],
  exports: [WebhookRegistrar, DeliveryReconciler],
})
export class DeliveryWebhooksModule {
  constructor(retention: Retention, events: WebhookEventStore) {
    retention.register({
      name: 'webhook_events',
      days: EVENTS_KEPT_DAYS,
      purge: (olderThan, limit) => events.purgeOlderThan(olderThan, limit),
      purgeTenant: (id, limit) => events.purgeTenant(id, limit),
    });
  }
}
