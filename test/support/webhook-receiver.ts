import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request the receiver got, and what it answered. */
export interface ReceivedWebhook {
  path: string;
  id: string;
  timestamp: string;
  signature: string;
  contentType: string;
  body: string;
  answered: number;
}

/**
 * A tenant's webhook endpoint for tests: a real `node:http` server on 127.0.0.1. `answer(path)` decides the status per
 * request (default 200; 0: never answer; a 3xx points `Location` at `/redirected`); every request is recorded with
 * what it was answered.
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  answer: (path: string) => number = () => 200;
  private server: Server | null = null;
  port = 0;

  async start(port = 0): Promise<this> {
    const server = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        const status = this.answer(path);
        this.received.push({
          path,
          id: String(req.headers['webhook-id'] ?? ''),
          timestamp: String(req.headers['webhook-timestamp'] ?? ''),
          signature: String(req.headers['webhook-signature'] ?? ''),
          contentType: String(req.headers['content-type'] ?? ''),
          body: Buffer.concat(chunks).toString('utf8'),
          answered: status,
        });
        if (status === 0) return; // hang: never answer (the sender times out, or dies waiting)
        const headers: Record<string, string> = { 'Content-Type': 'text/plain' };
        if (status >= 300 && status < 400) headers.Location = `http://127.0.0.1:${this.port}/redirected`;
        res.writeHead(status, headers).end(status < 300 ? 'ok' : 'nope');
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  url(path: string, host = '127.0.0.1'): string {
    return `http://${host}:${this.port}${path}`;
  }

  /** Requests to `path` answered 2xx. */
  accepted(path: string): ReceivedWebhook[] {
    return this.received.filter((r) => r.path === path && r.answered >= 200 && r.answered < 300);
  }

  all(path: string): ReceivedWebhook[] {
    return this.received.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Verifies a received webhook with the package's own `Webhook.verify`; returns the payload (throws if invalid). */
export function verified(
  secret: string,
  r: ReceivedWebhook,
): {
  type: string;
  timestamp: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  data: Record<string, any>;
} {
  return new Webhook(secret).verify(r.body, {
    'webhook-id': r.id,
    'webhook-timestamp': r.timestamp,
    'webhook-signature': r.signature,
  }) as ReturnType<typeof verified>;
}
