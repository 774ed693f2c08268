import { createHmac, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type {
  DeliveryFailureReason,
  SandboxAccount,
  SandboxOrder,
  SandboxReward,
  SandboxWebhook,
  WebhookEvent,
} from './sandbox.model';
import { DELIVERY_FAILURE_REASONS, WEBHOOK_RETRY_MAX_MS, serviceId } from './sandbox.model';
import type { SandboxState } from './sandbox.state';

/**
 * Reward delivery and webhook events, as the service has them (spec §3): an executed order's EMAIL and PHONE
 * rewards are delivered `delayMs` later — `delivery.status` becomes SUCCEEDED or FAILED (by the failure rules) —
 * and the account's webhook, if it has one, is sent `REWARDS.DELIVERY.SUCCEEDED` or `REWARDS.DELIVERY.FAILED`.
 * LINK rewards are delivered in the answer that creates them and have no delivery events.
 *
 * Nothing here runs inside a request: scheduling is a timer. Every timer is unref'd and cleared on close and on
 * reset; every attempt has a timeout and is aborted on close. Bounded: at most `limits.pendingWebhookDeliveries`
 * deliveries waiting plus events under way, and the newest `limits.webhookLog` attempts remembered.
 */

/** The header the service signs its webhook requests with (spec §3, from its sample app). */
export const SIGNATURE_HEADER = 'Tremendous-Webhook-Signature';

/**
 * `sha256=<hex HMAC-SHA256(private key, body)>`: the body exactly as sent (compact JSON, which is what the service's
 * sample re-serialises before hashing), the algorithm before the first `=`.
 */
export function webhookSignature(privateKey: string, body: string): string {
  return `sha256=${createHmac('sha256', privateKey).update(body).digest('hex')}`;
}

/** `created_utc` as the service's docs show it: ISO 8601 with milliseconds and a numeric offset (here UTC). */
export function eventTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace('Z', '+00:00');
}

/** One webhook request (the control API's delivery log). */
export interface WebhookAttempt {
  /** When the attempt started (wall clock). */
  at: string;
  account_id: string;
  webhook_id: string;
  url: string;
  event: WebhookEvent;
  uuid: string;
  resource_id: string;
  created_utc: string;
  /** 1 for the first attempt of an event. */
  attempt: number;
  /** The receiver's status; null when it did not answer (timeout, connection refused). */
  status_code: number | null;
  ok: boolean;
  error: string | null;
  duration_ms: number;
  /** Sent by `POST /webhooks/:id/simulate`. */
  simulated: boolean;
  /** The body exactly as sent, and its `Tremendous-Webhook-Signature`. */
  body: string;
  signature: string;
}

interface OutgoingEvent {
  accountId: string;
  webhookId: string;
  event: WebhookEvent;
  uuid: string;
  resourceId: string;
  createdUtc: string;
  body: string;
  simulated: boolean;
  generation: number;
}

export interface WebhookDeliveryStats {
  /** Rewards waiting for their delivery, plus retries waiting. */
  waiting: number;
  /** Webhook requests under way. */
  in_flight: number;
  rewards_delivered: number;
  rewards_failed: number;
  attempts: number;
  /** Events abandoned after their last attempt failed. */
  events_given_up: number;
  /** Deliveries done at once without events, and retries given up, because too much was pending. */
  dropped: number;
}

const SUCCEEDED: WebhookEvent = 'REWARDS.DELIVERY.SUCCEEDED';
const FAILED: WebhookEvent = 'REWARDS.DELIVERY.FAILED';
/** How much older `created_utc` is on the stale event of the out-of-order option. */
const STALE_EVENT_AGE_MS = 1000;

export class WebhookDeliveries {
  /** Waiting work (a reward's delivery, a retry's wait) by its timer, so `flush` can run it early. */
  private readonly timers = new Map<NodeJS.Timeout, () => void>();
  private readonly inFlight = new Set<AbortController>();
  private log: WebhookAttempt[] = [];
  private counters = zeroCounters();
  /** Bumped by reset and close: events under way from before stop at their next step. */
  private generation = 0;
  private closed = false;

  constructor(
    private readonly state: SandboxState,
    /** Called after the state changed outside a request (a reward delivered): the persister's markChanged. */
    private readonly onChange: () => void = () => undefined,
    private readonly send: typeof fetch = (input, init) => fetch(input, init),
  ) {}

  /** After an order is executed (created, or approved): its EMAIL and PHONE rewards are delivered after the delay. */
  orderExecuted(account: SandboxAccount, order: SandboxOrder): void {
    if (order.status !== 'EXECUTED') return;
    for (const reward of order.rewards) {
      if (reward.delivery.status === 'SCHEDULED') this.schedule(account.id, reward.id);
    }
  }

  /** After the state was loaded: rewards still waiting for delivery (the process stopped first) are scheduled again. */
  resume(): void {
    for (const account of this.state.accounts.values()) {
      for (const order of account.orderList) this.orderExecuted(account, order);
    }
  }

  /** `POST /webhooks/:id/simulate`: one event about a made-up reward. False when sending is off. */
  simulate(account: SandboxAccount, webhook: SandboxWebhook, event: WebhookEvent): boolean {
    if (!this.state.settings.webhooks.enabled) return false;
    const failure = event === FAILED ? this.defaultReason('EMAIL') : null;
    void this.sendInTurn([
      this.outgoing(account, webhook, event, serviceId(), this.state.now(), failure, true),
    ]);
    return true;
  }

  /** Runs every waiting delivery and retry now. Answers how many. */
  flush(): number {
    const waiting = [...this.timers];
    for (const [timer] of waiting) clearTimeout(timer);
    this.timers.clear();
    for (const [, run] of waiting) run();
    return waiting.length;
  }

  stats(): WebhookDeliveryStats {
    return { waiting: this.timers.size, in_flight: this.inFlight.size, ...this.counters };
  }

  /** The attempts remembered, oldest first. */
  attempts(): readonly WebhookAttempt[] {
    return this.log;
  }

  clearLog(): void {
    this.log = [];
  }

  /** `/__control/reset`: forgets what is waiting or under way (aborted), the log and the counters. */
  reset(): void {
    this.stopAll();
    this.log = [];
    this.counters = zeroCounters();
  }

  /** The sandbox closes: nothing more is scheduled or sent. */
  close(): void {
    this.closed = true;
    this.stopAll();
  }

  private stopAll(): void {
    this.generation++;
    for (const timer of this.timers.keys()) clearTimeout(timer);
    this.timers.clear();
    for (const controller of this.inFlight) controller.abort();
    this.inFlight.clear();
  }

  private pending(): number {
    return this.timers.size + this.inFlight.size;
  }

  private later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    timer.unref();
    this.timers.set(timer, run);
  }

  private schedule(accountId: string, rewardId: string): void {
    if (this.closed) return;
    if (this.pending() >= this.state.limits.pendingWebhookDeliveries) {
      this.counters.dropped++;
      this.deliver(accountId, rewardId, false);
      return;
    }
    this.later(this.state.settings.webhooks.delayMs, () => this.deliver(accountId, rewardId, true));
  }

  /** The reward's delivery outcome: its status changes, then its events go out (unless `withEvents` is false). */
  private deliver(accountId: string, rewardId: string, withEvents: boolean): void {
    const account = this.state.accounts.get(accountId);
    const reward = account?.rewardsById.get(rewardId);
    // Gone (past the caps, or a reset) or already delivered: nothing to do.
    if (!account || !reward || reward.delivery.status !== 'SCHEDULED') return;
    const failure = this.failureOf(reward);
    reward.delivery.status = failure ? 'FAILED' : 'SUCCEEDED';
    if (failure) this.counters.rewards_failed++;
    else this.counters.rewards_delivered++;
    this.onChange();
    const webhook = account.webhook;
    if (!withEvents || !webhook || !this.state.settings.webhooks.enabled) return;
    const { duplicate, outOfOrder } = this.state.settings.webhooks;
    const now = this.state.now();
    const outcome = this.outgoing(account, webhook, failure ? FAILED : SUCCEEDED, reward.id, now, failure);
    const events = duplicate ? [outcome, outcome] : [outcome];
    if (outOfOrder) {
      // An older event of the other outcome, arriving after the real one: only `created_utc` (or fetching the
      // reward) tells a receiver which is current.
      const stale = this.outgoing(
        account,
        webhook,
        failure ? SUCCEEDED : FAILED,
        reward.id,
        now - STALE_EVENT_AGE_MS,
        failure ? null : this.defaultReason(reward.delivery.method),
      );
      events.push(...(duplicate ? [stale, stale] : [stale]));
    }
    void this.sendInTurn(events);
  }

  private failureOf(reward: SandboxReward): DeliveryFailureReason | null {
    const { failRecipients, failureRatio, failureReason } = this.state.settings.webhooks;
    const { email, phone } = reward.recipient;
    const listed = [email, phone].some((r) => r !== undefined && failRecipients.includes(r.toLowerCase()));
    if (!listed && !(failureRatio > 0 && Math.random() < failureRatio)) return null;
    return failureReason ?? this.defaultReason(reward.delivery.method);
  }

  private defaultReason(method: SandboxReward['delivery']['method']): DeliveryFailureReason {
    return method === 'PHONE' ? 'sms_delivery_failed' : 'email_delivery_failed';
  }

  private outgoing(
    account: SandboxAccount,
    webhook: SandboxWebhook,
    event: WebhookEvent,
    resourceId: string,
    atMs: number,
    failure: DeliveryFailureReason | null,
    simulated = false,
  ): OutgoingEvent {
    const uuid = randomUUID();
    const createdUtc = eventTimestamp(atMs);
    const meta = failure ? { failure_reason: failure, retryable: DELIVERY_FAILURE_REASONS[failure] } : {};
    // Key order as the service's docs show it; compact, so the signature is over exactly these bytes.
    const body = JSON.stringify({
      event,
      uuid,
      created_utc: createdUtc,
      payload: { resource: { id: resourceId, type: 'rewards' }, meta },
    });
    return {
      accountId: account.id,
      webhookId: webhook.id,
      event,
      uuid,
      resourceId,
      createdUtc,
      body,
      simulated,
      generation: this.generation,
    };
  }

  /** One after the other, so the receiver gets them in this order (each with its retries). */
  private async sendInTurn(events: OutgoingEvent[]): Promise<void> {
    for (const event of events) await this.sendWithRetries(event);
  }

  private async sendWithRetries(event: OutgoingEvent): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed || event.generation !== this.generation) return;
      // Read again each time: a second POST /webhooks changes the URL, a DELETE stops the retries.
      const webhook = this.state.accounts.get(event.accountId)?.webhook;
      if (!webhook || webhook.id !== event.webhookId) return;
      if (await this.attempt(event, webhook, attempt)) return;
      const { maxAttempts, retryBaseMs } = this.state.settings.webhooks;
      if (attempt >= maxAttempts) {
        this.counters.events_given_up++;
        return;
      }
      if (this.pending() >= this.state.limits.pendingWebhookDeliveries) {
        this.counters.dropped++;
        return;
      }
      const wait = Math.min(WEBHOOK_RETRY_MAX_MS, retryBaseMs * 2 ** (attempt - 1));
      // Never resolves when reset or close clears the timer: this chain is then dropped with it.
      await new Promise<void>((resolve) => this.later(wait, resolve));
    }
  }

  /** One POST: 2xx is success; a redirect is not followed (it counts as a failure, like any other status). */
  private async attempt(event: OutgoingEvent, webhook: SandboxWebhook, attempt: number): Promise<boolean> {
    const signature = webhookSignature(webhook.privateKey, event.body);
    const timeoutMs = this.state.settings.webhooks.timeoutMs;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    timer.unref();
    this.inFlight.add(controller);
    const at = new Date().toISOString();
    const started = performance.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      const res = await this.send(webhook.url, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': 'rewards-sandbox-webhooks',
          [SIGNATURE_HEADER]: signature,
        },
        body: event.body,
        redirect: 'manual',
        signal: controller.signal,
      });
      status = res.status;
      await res.body?.cancel().catch(() => undefined);
    } catch (e) {
      error = timedOut
        ? `no answer within ${timeoutMs} ms`
        : controller.signal.aborted
          ? 'aborted'
          : describe(e);
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(controller);
    }
    // Aborted by a reset or close: the log and counters it would go to are gone.
    if (this.closed || event.generation !== this.generation) return false;
    const ok = status !== null && status >= 200 && status < 300;
    this.counters.attempts++;
    this.record({
      at,
      account_id: event.accountId,
      webhook_id: webhook.id,
      url: webhook.url,
      event: event.event,
      uuid: event.uuid,
      resource_id: event.resourceId,
      created_utc: event.createdUtc,
      attempt,
      status_code: status,
      ok,
      error: ok || error ? error : `answered ${status}`,
      duration_ms: Math.round(performance.now() - started),
      simulated: event.simulated,
      body: event.body,
      signature,
    });
    return ok;
  }

  private record(entry: WebhookAttempt): void {
    this.log.push(entry);
    const excess = this.log.length - this.state.limits.webhookLog;
    if (excess > 0) this.log.splice(0, excess);
  }
}

function zeroCounters(): Omit<WebhookDeliveryStats, 'waiting' | 'in_flight'> {
  return { rewards_delivered: 0, rewards_failed: 0, attempts: 0, events_given_up: 0, dropped: 0 };
}

/** fetch's errors hide the reason in `cause` (ECONNREFUSED, ENOTFOUND…). */
function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  const message = error instanceof Error ? error.message : String(error);
  return cause?.code
    ? `${message} (${cause.code})`
    : cause?.message
      ? `${message}: ${cause.message}`
      : message;
}
