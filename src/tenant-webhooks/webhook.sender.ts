import { isIP } from 'node:net';
import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import type { TenantWebhooksConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { hostOf, isForbiddenTargetError, pinnedLookup, resolveChecked } from './target-guard';

/** The most of a receiver's answer that is read (and then ignored). */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/** `kind`, for metrics: `http_error` is any non-2xx, 3xx included. */
type FailureKind = 'http_error' | 'timeout' | 'network_error' | 'forbidden_target';
export type AttemptOutcome =
  | { ok: true; statusCode: number }
  | { ok: false; statusCode: number | null; kind: FailureKind; error: string };

const failed = (kind: FailureKind, error: string, statusCode: number | null = null): AttemptOutcome => ({
  ok: false,
  statusCode,
  kind,
  error,
});

/** The body exactly as sent and signed: `{type, timestamp, data}`. */
export function bodyOf(payload: { type: string; timestamp: string; data: unknown }): string {
  return JSON.stringify({ type: payload.type, timestamp: payload.timestamp, data: payload.data });
}

/**
 * One delivery attempt: a signed POST (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`).
 * The connection goes only to addresses checked by the SSRF guard after DNS resolution (the lookup is pinned to them);
 * an IP literal is checked before connecting. No redirect is followed (a 3xx is a failure); the whole attempt is
 * bounded by `WEBHOOK_TIMEOUT_MS`; at most 64 KiB of the answer is read, and ignored.
 */
@Injectable()
export class WebhookSender implements OnModuleDestroy {
  private readonly agent: Agent;

  constructor(@InjectConfig('webhooks') private readonly config: TenantWebhooksConfig) {
    const timeout = config.timeoutMs;
    this.agent = new Agent({
      connect: {
        timeout,
        lookup: pinnedLookup(() => config.allowPrivateTargets) as never,
      },
      headersTimeout: timeout,
      bodyTimeout: timeout,
      keepAliveTimeout: 4_000,
      connections: 8,
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.agent.destroy().catch(() => undefined);
  }

  async send(
    url: string,
    webhookId: string,
    secret: string,
    body: string,
    now: Date,
  ): Promise<AttemptOutcome> {
    const signature = new Webhook(secret).sign(webhookId, now, body);
    try {
      const target = new URL(url);
      // IP literals never reach a lookup: check them here (names are checked in the pinned lookup).
      const host = hostOf(target);
      if (isIP(host)) await resolveChecked(host, this.config.allowPrivateTargets);
      const res = await request(target, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'RewardsGateway-Webhooks/1',
          'webhook-id': webhookId,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body,
        signal: AbortSignal.timeout(this.config.timeoutMs),
      });
      await drain(res.body);
      const status = res.statusCode;
      if (status >= 200 && status < 300) return { ok: true, statusCode: status };
      const redirect = status >= 300 && status < 400 ? ' (a redirect; redirects are not followed)' : '';
      return failed('http_error', `receiver answered ${status}${redirect}`, status);
    } catch (error) {
      if (isForbiddenTargetError(error)) return failed('forbidden_target', messageOf(error));
      const { name, code } = (error ?? {}) as { name?: string; code?: string };
      if (
        name === 'TimeoutError' ||
        name === 'AbortError' ||
        /TIMEOUT/i.test(code ?? '') ||
        /timeout/i.test(messageOf(error))
      ) {
        return failed('timeout', `no answer within ${this.config.timeoutMs} ms`);
      }
      return failed('network_error', messageOf(error));
    }
  }
}

/** Reads at most MAX_RESPONSE_BYTES of the answer and drops the rest (the connection is then not reused). */
async function drain(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<void> {
  let read = 0;
  for await (const chunk of body) {
    read += chunk.length;
    if (read > MAX_RESPONSE_BYTES) {
      body.destroy();
      return;
    }
  }
}

function messageOf(error: unknown): string {
  const e = error as { message?: string; code?: string; cause?: { message?: string; code?: string } };
  const own = e?.message || String(error);
  const cause = e?.cause?.message && e.cause.message !== own ? `: ${e.cause.message}` : '';
  return `${e?.code && !own.includes(e.code) ? `${e.code} ` : ''}${own}${cause}`.slice(0, 500);
}
