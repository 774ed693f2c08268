import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { AppError } from '../common/app-error';
import { Clock } from '../common/clock';
import { InjectConfig } from '../config/config.module';
import type { DispatchConfig, RewardsEnvironment } from '../config/app-config';
import type { ActivatedConnection } from '../connections/connection-activation';
import { ConnectionActivationHooks } from '../connections/connection-activation';
import { MetricsService } from '../metrics/metrics.service';
import type { Priority } from '../rewards-api/account-pacer';
import { RewardsApiError, mapUpstreamError } from '../rewards-api/rewards-api.errors';
import { RewardsApi } from '../token-vault/rewards-api.service';
import { ConnectionNotActiveError, ConnectionNotFoundError } from '../token-vault/token-vault.errors';
import { WebhookKeyStore } from './webhook-key.store';
import { rootSpan } from '../common/tracing';

/** The registration call at connect: the browser waits for it, so it is short. */
const REGISTER_TIMEOUT_MS = 5_000;
/** A registration under way is due again after this (its process may have died). */
const ATTEMPT_LEASE_MS = 2 * 60_000;
const RETRY_MAX_MS = 3600_000;
const RETRIES_PER_PASS = 10;
/** Live connections without any registration (connected before this feature) are adopted this often. */
const ADOPT_EVERY_MS = 5 * 60_000;
const ADOPT_PER_PASS = 50;
/** A connection this fresh without a registration is the connect flow's to register, not the background's. */
const ADOPT_GRACE_MS = 60_000;

/**
 * Registers the gateway as the receiver of the service's webhooks for each connected account (`POST /webhooks` with
 * the connection's token), as the connection becomes active and before the browser is sent back, so no event of the
 * first send is missed. The service keeps one webhook per organization (a second POST re-points it, same id and key).
 * A failure never fails the connect: it is retried in the background (`retryDue`, backoff up to 1 h).
 */
@Injectable()
export class WebhookRegistrar implements OnModuleInit {
  private readonly logger = new Logger(WebhookRegistrar.name);
  private lastAdopt: number;

  constructor(
    @InjectConfig('dispatch') private readonly config: DispatchConfig,
    @InjectConfig('publicBaseUrl') private readonly publicBaseUrl: string,
    private readonly keys: WebhookKeyStore,
    private readonly rewardsApi: RewardsApi,
    private readonly activation: ConnectionActivationHooks,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
  ) {
    this.lastAdopt = clock.now();
  }

  onModuleInit(): void {
    if (this.config.deliveryWebhooksRegister)
      this.activation.register('delivery-webhook', async (c) => {
        await this.registerAtConnect(c);
      });
  }

  /** The connect flow's hook: records the registration, then registers at once (interactive priority). */
  async registerAtConnect(connection: ActivatedConnection): Promise<boolean> {
    const registration = await this.keys.begin(
      connection.id,
      connection.environment,
      new Date(this.clock.now() + ATTEMPT_LEASE_MS),
    );
    if (registration.status === 'registered') return true;
    return this.attempt(registration.id, connection.id, connection.environment, 0, 'interactive');
  }

  /** One background pass: adopts unregistered live connections (now and then) and retries what is due. */
  async retryDue(): Promise<number> {
    if (!this.config.deliveryWebhooksRegister) return 0;
    const now = this.clock.now();
    if (now - this.lastAdopt >= ADOPT_EVERY_MS) {
      this.lastAdopt = now;
      const adopted = await this.keys.adoptUnregistered(ADOPT_PER_PASS, ADOPT_GRACE_MS);
      if (adopted) this.logger.log({ adopted }, 'registering delivery webhooks of connections that had none');
    }
    const due = await this.keys.claimDue(RETRIES_PER_PASS, ATTEMPT_LEASE_MS);
    for (const r of due) {
      if (r.connection_status !== 'active' && r.connection_status !== 'error') {
        await this.keys.markFailed(r.id, `connection ${r.connection_status ?? 'gone'}`, null);
        this.metrics.webhookRegistrations.inc({ outcome: 'abandoned' });
        continue;
      }
      await rootSpan(
        'webhook.registration',
        () => this.attempt(r.id, r.connection_id, r.environment, r.attempts, 'bulk'),
        { 'connection.id': r.connection_id },
      );
    }
    return due.length;
  }

  private async attempt(
    id: string,
    connectionId: string,
    environment: RewardsEnvironment,
    attemptsSoFar: number,
    priority: Priority,
  ): Promise<boolean> {
    try {
      const webhook = await this.rewardsApi
        .forConnection(connectionId, priority)
        .registerWebhook(
          `${this.publicBaseUrl}/webhooks/rewards/${environment}?account=${id}`,
          REGISTER_TIMEOUT_MS,
        );
      await this.keys.markRegistered(id, connectionId, webhook.id, webhook.private_key);
      this.metrics.webhookRegistrations.inc({ outcome: 'registered' });
      this.logger.log({ connectionId, environment, webhookId: webhook.id }, 'delivery webhook registered');
      return true;
    } catch (error) {
      // A connection that is gone or needs a new consent is not retried (a reconnect is a new connection).
      const gone = isGone(error);
      const reason = describe(error);
      const retryAt = gone
        ? null
        : new Date(this.clock.now() + registrationRetryMs(this.config.deliveryWebhookRetryMs, attemptsSoFar));
      await this.keys
        .markFailed(id, reason, retryAt)
        .catch((e: Error) =>
          this.logger.warn({ connectionId, err: e.message }, 'could not record the failure'),
        );
      this.metrics.webhookRegistrations.inc({ outcome: gone ? 'abandoned' : 'failed' });
      this.logger.warn(
        { connectionId, environment, reason, retryAt: retryAt?.toISOString() ?? null },
        gone
          ? 'delivery webhook not registered: the connection is no longer active'
          : 'delivery webhook registration failed; retried in the background (reconciliation covers deliveries meanwhile)',
      );
      return false;
    }
  }
}

/**
 * The wait before retrying a registration after `attempts` failed ones: DELIVERY_WEBHOOK_RETRY_MS (`baseMs`) doubling
 * per attempt, at most 1 h, with ±20 % jitter (`random` in [0, 1)).
 */
export function registrationRetryMs(baseMs: number, attempts: number, random = Math.random): number {
  const base = Math.min(RETRY_MAX_MS, baseMs * 2 ** Math.min(attempts, 20));
  return Math.round(base * (0.8 + random() * 0.4));
}

/** The connection is gone or needs a new consent: asking the service again cannot help. */
export const isGone = (error: unknown): boolean =>
  error instanceof ConnectionNotActiveError || error instanceof ConnectionNotFoundError;

/** Why an attempt failed, in our terms: a code, the service's status and message — never a key or token. */
function describe(error: unknown): string {
  if (error instanceof RewardsApiError) {
    const failure = mapUpstreamError(error, 'the webhook registration');
    return `${failure.code} (${error.status ?? 'no answer'}): ${error.message.slice(0, 200)}`;
  }
  if (error instanceof AppError) return error.code;
  return error instanceof Error ? error.name : 'unknown error';
}
