/**
 * The events a tenant can subscribe an endpoint to. They are produced by Postgres triggers (migration
 * 1700000013000-tenant-webhooks), in the transaction of the state change itself — keep this list and the triggers in
 * step.
 */
export const WEBHOOK_EVENT_TYPES = [
  'dispatch.completed',
  'reward.sent',
  'reward.delivered',
  'reward.delivery_failed',
  'connection.needs_reauth',
  'connection.recovered',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** `events: ["*"]` subscribes to every event, including ones added later. */
export const ALL_EVENTS = '*';

/** At most this many endpoints per tenant (disabled ones included). */
export const MAX_ENDPOINTS_PER_TENANT = 10;
export const MAX_URL_LENGTH = 2048;

/**
 * The default retry schedule (ms after each failed attempt): 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h,
 * then every 8 h, until `WEBHOOK_GIVE_UP_AFTER_MS` has passed since the event was queued.
 */
export const DEFAULT_RETRY_SCHEDULE_MS = [
  5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000,
];

/** The wait after the `attempts`-th failed attempt (1-based), ±10 % jitter so retries of a burst spread out. */
export function retryDelayMs(schedule: readonly number[], attempts: number, random = Math.random): number {
  const base = schedule[Math.min(Math.max(attempts, 1), schedule.length) - 1];
  return Math.max(1, Math.round(base * (0.9 + 0.2 * random())));
}

/** A standard-webhooks signing secret: `whsec_` + base64 of 32 random bytes. */
export const SECRET_PREFIX = 'whsec_';
