import { Controller, Headers, HttpCode, Logger, Param, Post, Query, Req } from '@nestjs/common';
import {
  ApiBody,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { ApiErrors, example } from '../common/api-docs';
import { Public } from '../tenants/auth/auth.decorators';
import { CommonError } from '../common/app-error';
import { Clock } from '../common/clock';
import { TtlCache } from '../common/ttl-cache';
import { InjectConfig } from '../config/config.module';
import type { RewardsConfig, RewardsEnvironment } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { DispatchStore } from '../reward-dispatch/dispatch.store';
import { WebhookKey, WebhookKeyStore } from './webhook-key.store';
import { WebhookSignatureInvalidError } from './delivery-webhooks.errors';
import {
  type WebhookRequest,
  deliveryWebhookBody,
  notJson,
  notJsonType,
  notServed,
  parseJson,
  servedEnvironment,
  tooLarge,
} from './webhook-body';
import { deliveryOutcome } from './delivery-reconciler';
import { WebhookEventStore } from './webhook-event.store';
import { SIGNATURE_HEADER, parseSignature, signatureMatches, signedForms } from './webhook-signature';

export type WebhookOutcome = 'applied' | 'duplicate' | 'ignored';

/** The events that carry a reward's delivery outcome: the status they mean, as a read of the reward reports it. */
const DELIVERY_EVENT = /^REWARDS\.DELIVERY\.(SUCCEEDED|FAILED)$/;

/** Keys of this many distinct webhooks are tried when an event's URL names no usable registration. */
const FALLBACK_KEYS = 10;
const KEY_TTL_MS = 60_000;
const UNKNOWN_TTL_MS = 30_000;
const FALLBACK_TTL_MS = 15_000;
const CONNECTIONS_TTL_MS = 10_000;
const CACHE_MAX = 5_000;
const LOGGED_MAX = 500;

const REGISTRATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const EVENT_UUID = /^[A-Za-z0-9-]{1,100}$/;
const EVENT_NAME = /^[A-Za-z0-9_.]{1,64}$/;
const RESOURCE_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Where the rewards service posts its delivery webhooks (`POST /webhooks/rewards/{environment}?account=<registration
 * id>`): outside `/v1`, no API key — the signature is the authentication. The signature is checked against the
 * registration's key (else, bounded, against the environment's keys), the event is deduplicated by its `uuid`, and
 * `REWARDS.DELIVERY.SUCCEEDED|FAILED` is applied to the reward the service knows as `payload.resource.id` — among the
 * rewards of the connections registered with the same upstream webhook (the same account) only — through
 * `DispatchStore.recordDelivery`, which is idempotent and never lets an older event replace a newer state. Anything else signed correctly is answered 2xx and ignored (logged once per kind and event type).
 */
@ApiTags('delivery webhooks')
@Controller('webhooks/rewards')
export class DeliveryWebhookIntake {
  private readonly logger = new Logger(DeliveryWebhookIntake.name);
  private readonly registrations: TtlCache<WebhookKey | null>;
  private readonly fallback: TtlCache<WebhookKey[]>;
  private readonly webhookConnections: TtlCache<string[]>;
  private readonly logged = new Set<string>();

  constructor(
    @InjectConfig('rewards') private readonly environments: RewardsConfig,
    private readonly keys: WebhookKeyStore,
    private readonly events: WebhookEventStore,
    private readonly dispatches: DispatchStore,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
  ) {
    this.registrations = new TtlCache(clock, CACHE_MAX);
    this.fallback = new TtlCache(clock, 10);
    this.webhookConnections = new TtlCache(clock, CACHE_MAX);
  }

  /** The route's body reader (app.factory mounts it on `/webhooks/rewards` only). */
  bodyReader(): ReturnType<typeof deliveryWebhookBody> {
    return deliveryWebhookBody(this.environments, () =>
      this.metrics.deliveryWebhooks.inc({ outcome: 'bad_signature' }),
    );
  }

  @Post(':environment')
  @Public()
  @HttpCode(200)
  @ApiOperation({
    operationId: 'DeliveryWebhooksController_receive', // as published (generated clients name their call by it)
    summary:
      'The rewards service’s webhooks (REWARDS.DELIVERY.SUCCEEDED / FAILED), registered by the gateway per connection. ' +
      'Signed with HMAC-SHA256 of the body and the webhook’s private key; 401 webhook_signature_invalid otherwise. ' +
      'Deduplicated by uuid; other events are answered 200 and ignored. JSON, at most 64 KiB.',
  })
  @ApiParam({ name: 'environment', enum: ['sandbox', 'production'] })
  @ApiQuery({
    name: 'account',
    required: false,
    description: 'The registration id the gateway put in the URL.',
  })
  @ApiHeader({
    name: 'Tremendous-Webhook-Signature',
    description: 'sha256=<hex HMAC-SHA256(private key, body)>',
  })
  @ApiBody({
    description:
      'The event exactly as the rewards service sends it: only a body signed with the webhook’s private key is accepted.',
    schema: { type: 'object' },
    examples: {
      succeeded: {
        summary: 'A reward was delivered (needs the service’s signature)',
        value: {
          event: 'REWARDS.DELIVERY.SUCCEEDED',
          uuid: '9c3b2a41-7d0e-4f5a-8b6c-1e2d3f4a5b6c',
          created_utc: '2026-11-23T17:23:05.629+00:00',
          payload: { resource: { id: '4SBVBQGUZOGR', type: 'rewards' }, meta: {} },
        },
      },
    },
  })
  @ApiOkResponse({
    description: 'Recorded (`applied`), seen before (`duplicate`) or not a delivery event (`ignored`).',
    schema: { type: 'object', example: { received: true, outcome: 'applied' } },
  })
  @ApiErrors(
    example(notJson(), 'the body does not parse, or is empty'),
    example(new WebhookSignatureInvalidError(), 'no signature, or one that matches no key the gateway holds'),
    example(notServed(), 'an environment this gateway does not serve'),
    example(tooLarge(), 'a body over 64 KiB'),
    example(notJsonType('text/plain'), 'a body that is not application/json (or compressed)'),
  )
  async receive(
    @Param('environment') environment: string,
    @Query('account') query: unknown,
    @Headers(SIGNATURE_HEADER) signature: string | undefined,
    @Req() { body: raw }: WebhookRequest,
  ): Promise<{ received: true; outcome: WebhookOutcome }> {
    const env = servedEnvironment(this.environments, environment);
    const account = typeof query === 'string' ? query : undefined;
    const provided = parseSignature(signature);
    if (!provided) return this.badSignature();
    if (!raw) throw new CommonError(400, 'invalid_json', 'The webhook has no body.');
    const parsed = parseJson(raw);
    const key = await this.verify(env, account, provided, signedForms(raw, parsed));
    if (!key) return this.badSignature();
    const outcome = await this.handle(env, key, parsed);
    this.metrics.deliveryWebhooks.inc({ outcome });
    return { received: true, outcome };
  }

  private badSignature(): never {
    this.metrics.deliveryWebhooks.inc({ outcome: 'bad_signature' });
    throw new WebhookSignatureInvalidError();
  }

  /**
   * The key that signed the body: the one of the registration named by `?account=`, or — when the URL names none, an
   * unknown one or one without a key yet — one of the environment's (at most FALLBACK_KEYS, cached). A registration
   * whose key does not match is not retried against others.
   */
  private async verify(
    env: RewardsEnvironment,
    account: string | undefined,
    provided: Buffer,
    forms: Buffer[],
  ): Promise<WebhookKey | null> {
    if (account !== undefined && REGISTRATION_ID.test(account)) {
      const key = await this.registrationKey(env, account);
      if (key) return signatureMatches(provided, key, forms) ? key : null;
    }
    const fallback = await this.fallback.getOrLoad(env, FALLBACK_TTL_MS, () =>
      this.keys.environmentKeys(env, FALLBACK_KEYS),
    );
    return fallback.find((key) => signatureMatches(provided, key, forms)) ?? null;
  }

  private async registrationKey(env: RewardsEnvironment, id: string): Promise<WebhookKey | null> {
    const cacheKey = `${env}/${id}`;
    const cached = this.registrations.get(cacheKey);
    if (cached) return cached.value;
    const found = await this.keys.forRegistration(id, env);
    // Not registered yet: not cached (its key may land any moment); unknown: cached briefly (cheap junk).
    if (found === 'unregistered') return null;
    this.registrations.set(cacheKey, found, found ? KEY_TTL_MS : UNKNOWN_TTL_MS);
    return found;
  }

  private async handle(env: RewardsEnvironment, key: WebhookKey, parsed: unknown): Promise<WebhookOutcome> {
    const event = isObject(parsed) ? parsed : {};
    const name = typeof event.event === 'string' && EVENT_NAME.test(event.event) ? event.event : 'malformed';
    const uuid = typeof event.uuid === 'string' && EVENT_UUID.test(event.uuid) ? event.uuid : null;
    if (!uuid) {
      this.once('malformed', name, 'a signed webhook without a usable uuid: ignored');
      return 'ignored';
    }
    if (await this.events.seen(uuid)) return 'duplicate';

    let applied = false;
    const status = DELIVERY_EVENT.exec(name)?.[1];
    if (!status) {
      this.once('unknown_event', name, 'a webhook event the gateway does not act on: ignored');
    } else {
      const payload = isObject(event.payload) ? event.payload : {};
      const resource = isObject(payload.resource) ? payload.resource : {};
      const meta = isObject(payload.meta) ? payload.meta : {};
      const rewardId = typeof resource.id === 'string' && RESOURCE_ID.test(resource.id) ? resource.id : null;
      if (!rewardId || (resource.type !== undefined && resource.type !== 'rewards')) {
        this.once('malformed', name, 'a delivery event without a reward id: ignored');
      } else {
        const outcome = deliveryOutcome(
          { delivery: { status, failure_reason: meta.failure_reason } },
          this.clock.now(),
        );
        const created = typeof event.created_utc === 'string' ? Date.parse(event.created_utc) : NaN;
        if (Number.isFinite(created)) outcome.eventAt = new Date(created);
        applied = await this.apply(env, key, rewardId, outcome);
        if (!applied)
          this.once(
            'no_change',
            name,
            'a delivery event that changed nothing (a reward of another account or not sent through the gateway, or not newer than its state): ignored',
          );
      }
    }
    // After the change (or the decision that there is none): a crash before this line means a harmless re-apply.
    const first = await this.events.record(uuid, key.connectionId, name);
    return applied ? 'applied' : first ? 'ignored' : 'duplicate';
  }

  /**
   * Applies the outcome to the reward among the rewards of every connection registered with this upstream webhook
   * (cached briefly; looked up afresh once when nothing matched, in case a connection joined since).
   */
  private async apply(
    env: RewardsEnvironment,
    key: WebhookKey,
    rewardId: string,
    outcome: ReturnType<typeof deliveryOutcome>,
  ): Promise<boolean> {
    const cacheKey = `${env}/${key.webhookId}`;
    const cached = this.webhookConnections.get(cacheKey)?.value;
    const load = async () => {
      const ids = await this.keys.connectionsOfWebhook(env, key.webhookId);
      const all = ids.includes(key.connectionId) ? ids : [...ids, key.connectionId];
      this.webhookConnections.set(cacheKey, all, CONNECTIONS_TTL_MS);
      return all;
    };
    const connections = cached ?? (await load());
    if (await this.dispatches.recordDelivery(rewardId, connections, outcome)) return true;
    if (!cached) return false;
    const fresh = await load();
    if (fresh.length === connections.length && fresh.every((id) => connections.includes(id))) return false;
    return (await this.dispatches.recordDelivery(rewardId, fresh, outcome)) !== null;
  }

  /** Logs what was ignored once per kind and event type in this process (bounded). */
  private once(kind: string, event: string, message: string): void {
    const id = `${kind}:${event}`;
    if (this.logged.has(id) || this.logged.size >= LOGGED_MAX) return;
    this.logged.add(id);
    this.logger.log({ kind, event }, message);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
