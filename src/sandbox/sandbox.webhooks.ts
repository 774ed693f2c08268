import { randomBytes } from 'node:crypto';
import express from 'express';
import type { NextFunction, Request, Response, Router } from 'express';
import type { WebhookDeliveries } from './sandbox.deliveries';
import type { ApiRequest, Problem, RouteGuard } from './sandbox.http';
import { apiError, problem, queryString, sendProblem } from './sandbox.http';
import type {
  DeliveryFailureReason,
  SandboxAccount,
  SandboxWebhook,
  SandboxWebhookSettings,
  WebhookEvent,
  WebhookScope,
} from './sandbox.model';
import { DELIVERY_FAILURE_REASONS, WEBHOOK_EVENTS, serviceId } from './sandbox.model';
import type { SandboxState } from './sandbox.state';

/**
 * `/api/v2/webhooks` as the service has them (spec §2, §3): one webhook per account (organization). POST creates it —
 * or, when there is one, changes its URL and keeps its id and private key ("The URL of the endpoint can be changed by
 * making a request to this endpoint again"); GET lists it; GET/DELETE `/:id` (DELETE → 204); GET `/:id/events`;
 * POST `/:id/simulate` `{event}` sends a test event. Answers as the SDKs list them: 400 for a bad URL, 404 for an
 * unknown id, 422 for an event that cannot be simulated.
 */
export function webhooksRouter(
  state: SandboxState,
  guard: RouteGuard,
  deliveries: WebhookDeliveries,
): Router {
  const router = express.Router();
  const checks = [guard('webhooks'), webhookScope(state)];
  const json = express.json({ limit: '64kb' });

  router.post('/webhooks', ...checks, json, (req, res) => {
    const { account } = (req as ApiRequest).caller;
    const url = checkUrl(bodyOf(req).url);
    if (typeof url !== 'string') return sendProblem(res, url);
    if (account.webhook) account.webhook.url = url;
    else account.webhook = { id: serviceId(), url, privateKey: randomBytes(32).toString('hex') };
    res.json({ webhook: webhookView(account.webhook) });
  });
  router.get('/webhooks', ...checks, (req, res) => {
    const { webhook } = (req as ApiRequest).caller.account;
    res.json({ webhooks: webhook ? [webhookView(webhook)] : [] });
  });
  router.get('/webhooks/:id', ...checks, (req, res) => {
    const webhook = ownWebhook(req, res);
    if (webhook) res.json({ webhook: webhookView(webhook) });
  });
  router.delete('/webhooks/:id', ...checks, (req, res) => {
    if (!ownWebhook(req, res)) return;
    delete (req as ApiRequest).caller.account.webhook;
    res.status(204).end();
  });
  router.get('/webhooks/:id/events', ...checks, (req, res) => {
    if (ownWebhook(req, res)) res.json({ events: [...WEBHOOK_EVENTS] });
  });
  router.post('/webhooks/:id/simulate', ...checks, json, (req, res) => {
    const webhook = ownWebhook(req, res);
    if (!webhook) return;
    const event = bodyOf(req).event;
    if (typeof event !== 'string' || !(WEBHOOK_EVENTS as readonly string[]).includes(event)) {
      return apiError(res, 422, `event must be one of ${WEBHOOK_EVENTS.join(', ')}`, {
        event: event ?? null,
      });
    }
    deliveries.simulate((req as ApiRequest).caller.account, webhook, event as WebhookEvent);
    res.type('text/plain').send('OK');
  });
  return router;
}

/** The DOCS versions disagree on the scope webhooks need; the `scope` setting picks one, or takes either. */
function webhookScope(state: SandboxState) {
  return (req: Request, res: Response, next: NextFunction) => {
    const { scopes } = (req as ApiRequest).caller;
    const needed = state.settings.webhooks.scope;
    const ok =
      needed === 'any'
        ? scopes.includes('default') || scopes.includes('team_management')
        : scopes.includes(needed);
    if (ok) return next();
    apiError(
      res,
      403,
      `This access token does not grant this operation (needs scope "${needed === 'any' ? 'default' : needed}").`,
    );
  };
}

function bodyOf(req: Request): Record<string, unknown> {
  const body: unknown = req.body;
  return body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
}

/** The caller's webhook named by `:id`; else a 404 is answered (another account's id is unknown too). */
function ownWebhook(req: Request, res: Response): SandboxWebhook | undefined {
  const { webhook } = (req as ApiRequest).caller.account;
  if (webhook && webhook.id === req.params.id) return webhook;
  apiError(res, 404, 'Webhook not found', { id: req.params.id });
  return undefined;
}

const MAX_URL_LENGTH = 2048;

/** An absolute http(s) URL without credentials (the sandbox also takes http: local receivers in tests and demos). */
function checkUrl(raw: unknown): string | Problem {
  const shown = typeof raw === 'string' && raw.length > 200 ? `${raw.slice(0, 200)}…` : (raw ?? null);
  if (typeof raw !== 'string' || raw.trim() === '')
    return problem('url is required: the absolute http or https URL the webhook posts events to', {
      url: shown,
    });
  if (raw.length > MAX_URL_LENGTH)
    return problem(`url must be at most ${MAX_URL_LENGTH} characters`, { url: shown });
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return problem('url must be an absolute http or https URL', { url: shown });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return problem('url must be an absolute http or https URL', { url: shown });
  if (url.username || url.password)
    return problem('url must not contain a user name or password', { url: shown });
  return raw.trim();
}

function webhookView(webhook: SandboxWebhook) {
  return { id: webhook.id, url: webhook.url, private_key: webhook.privateKey };
}

/**
 * `/__control/webhooks`: the delivery settings (GET, POST), the attempts made (`/deliveries`, newest last; DELETE
 * clears them) and `/flush` (every waiting delivery and retry now).
 */
export function webhookControlRouter(state: SandboxState, deliveries: WebhookDeliveries): Router {
  const router = express.Router();
  const overview = () => ({
    settings: webhookSettingsView(state.settings.webhooks),
    registrations: [...state.accounts.values()]
      .filter((a): a is SandboxAccount & { webhook: SandboxWebhook } => a.webhook !== undefined)
      .map((a) => ({ account_id: a.id, ...webhookView(a.webhook) })),
    stats: deliveries.stats(),
  });
  router.get('/', (_req, res) => res.json(overview()));
  router.post('/', (req, res) => {
    const next = applyWebhookSettings(state.settings.webhooks, bodyOf(req));
    if (typeof next === 'string') return res.status(400).json({ error: next });
    state.settings = { ...state.settings, webhooks: next };
    res.json(overview());
  });
  router.get('/deliveries', (req, res) => {
    const filters = (['account_id', 'event', 'uuid', 'resource_id', 'webhook_id'] as const)
      .map((name) => [name, queryString(req.query[name])] as const)
      .filter(([, value]) => value !== undefined);
    const list = deliveries.attempts().filter((a) => filters.every(([name, value]) => a[name] === value));
    res.json({ deliveries: list, total_count: list.length });
  });
  router.delete('/deliveries', (_req, res) => {
    deliveries.clearLog();
    res.json({ deliveries: [], total_count: 0 });
  });
  router.post('/flush', (_req, res) => res.json({ flushed: deliveries.flush() }));
  return router;
}

function webhookSettingsView(w: SandboxWebhookSettings) {
  return {
    enabled: w.enabled,
    delay_ms: w.delayMs,
    fail_recipients: w.failRecipients,
    failure_ratio: w.failureRatio,
    failure_reason: w.failureReason ?? null,
    duplicate: w.duplicate,
    out_of_order: w.outOfOrder,
    max_attempts: w.maxAttempts,
    retry_base_ms: w.retryBaseMs,
    timeout_ms: w.timeoutMs,
    scope: w.scope,
  };
}

const MAX_FAIL_RECIPIENTS = 1000;
const SCOPES: readonly WebhookScope[] = ['any', 'default', 'team_management'];

/** The settings with the body's changes, or a message when one is refused (then nothing changes). */
function applyWebhookSettings(
  current: SandboxWebhookSettings,
  body: Record<string, unknown>,
): SandboxWebhookSettings | string {
  const next: SandboxWebhookSettings = { ...current };
  const whole = (key: string, min: number, max: number) => {
    const v = body[key];
    return Number.isInteger(v) && (v as number) >= min && (v as number) <= max
      ? (v as number)
      : `${key} must be a whole number from ${min} to ${max}`;
  };
  for (const [key, value] of Object.entries(body)) {
    switch (key) {
      case 'enabled':
      case 'duplicate':
      case 'out_of_order':
        if (typeof value !== 'boolean') return `${key} must be true or false`;
        if (key === 'enabled') next.enabled = value;
        else if (key === 'duplicate') next.duplicate = value;
        else next.outOfOrder = value;
        break;
      case 'delay_ms':
      case 'max_attempts':
      case 'retry_base_ms':
      case 'timeout_ms': {
        const [min, max] = {
          delay_ms: [0, 3_600_000],
          max_attempts: [1, 10],
          retry_base_ms: [0, 60_000],
          timeout_ms: [1, 30_000],
        }[key];
        const n = whole(key, min, max);
        if (typeof n === 'string') return n;
        if (key === 'delay_ms') next.delayMs = n;
        else if (key === 'max_attempts') next.maxAttempts = n;
        else if (key === 'retry_base_ms') next.retryBaseMs = n;
        else next.timeoutMs = n;
        break;
      }
      case 'fail_recipients':
        if (
          !Array.isArray(value) ||
          value.length > MAX_FAIL_RECIPIENTS ||
          !value.every((r) => typeof r === 'string' && r.length > 0 && r.length <= 320)
        )
          return `fail_recipients must be a list of at most ${MAX_FAIL_RECIPIENTS} e-mail addresses or phone numbers`;
        next.failRecipients = (value as string[]).map((r) => r.trim().toLowerCase());
        break;
      case 'failure_ratio':
        if (typeof value !== 'number' || !(value >= 0 && value <= 1))
          return 'failure_ratio must be a number from 0 to 1';
        next.failureRatio = value;
        break;
      case 'failure_reason':
        if (value === null) delete next.failureReason;
        else if (typeof value === 'string' && Object.hasOwn(DELIVERY_FAILURE_REASONS, value))
          next.failureReason = value as DeliveryFailureReason;
        else
          return `failure_reason must be null or one of ${Object.keys(DELIVERY_FAILURE_REASONS).join(', ')}`;
        break;
      case 'scope':
        if (!SCOPES.includes(value as WebhookScope)) return `scope must be one of ${SCOPES.join(', ')}`;
        next.scope = value as WebhookScope;
        break;
      default:
        return `unknown setting ${key}; known: enabled, delay_ms, fail_recipients, failure_ratio, failure_reason, duplicate, out_of_order, max_attempts, retry_base_ms, timeout_ms, scope`;
    }
  }
  return next;
}
