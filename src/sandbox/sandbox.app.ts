import express from 'express';
import type { Express, NextFunction, Request, Response } from 'express';
import { apiRouter } from './sandbox.api';
import { controlRouter } from './sandbox.control';
import { WebhookDeliveries } from './sandbox.deliveries';
import { FaultInjector } from './sandbox.faults';
import type { SandboxClient, SandboxLimits, SandboxSettings } from './sandbox.state';
import { SandboxState } from './sandbox.state';
import type { SandboxLog, SandboxPersistence } from './sandbox.persistence';
import { SandboxPersister } from './sandbox.persistence';
import { oauthRouter } from './sandbox.oauth';
import { page } from './sandbox.html';

export interface SandboxOptions {
  /** Registered developer apps (client id, secret, exact redirect URIs). */
  clients: SandboxClient[];
  /** Mount `/__control`. Never on in production. */
  control: boolean;
  settings?: Partial<SandboxSettings>;
  /** Bounds on what the state keeps (DEFAULT_SANDBOX_LIMITS unless given). */
  limits?: Partial<SandboxLimits>;
  /**
   * Keep the state across restarts (the gateway: Postgres). Without it (`npm run sandbox`, the tests' sandboxes)
   * the state lives in memory only.
   */
  persistence?: SandboxPersistence;
  /** Where persistence reports (default: stderr for errors only). */
  logger?: SandboxLog;
}

export interface Sandbox {
  app: Express;
  state: SandboxState;
  faults: FaultInjector;
  /** Resolves once the stored state is loaded (at once without persistence). */
  ready: Promise<void>;
  /** Present with persistence. */
  persister?: SandboxPersister;
  /** Reward deliveries and webhook events (timers and requests under way, the attempts made). */
  deliveries: WebhookDeliveries;
  /**
   * Stops the sweep timer and every delivery and webhook request; with persistence, refuses further requests (503)
   * and writes the last changes.
   */
  close(): Promise<void>;
}

const stderrLog: SandboxLog = { log: () => undefined, error: (m) => process.stderr.write(`${m}\n`) };

/**
 * The rewards-service emulator as a plain Express app: fast (it is benchmarked at thousands of orders a second),
 * mountable under `/sandbox` in the gateway, or served alone by `npm run sandbox`.
 */
export function createSandbox(options: SandboxOptions): Sandbox {
  const state = new SandboxState(options.clients, options.settings, options.limits);
  const faults = new FaultInjector();
  const guard = (route: string) => faults.middleware(state, route);
  const persister = options.persistence
    ? new SandboxPersister(state, options.persistence, options.logger ?? stderrLog)
    : undefined;
  // A delivery changes the state outside any request: written with the next write (or the last one, on close).
  const deliveries = new WebhookDeliveries(state, () => persister?.markChanged());
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  if (persister) app.use(persister.gate(), persister.tracker());
  app.use('/oauth', oauthRouter(state, guard));
  app.use('/api/v2', apiRouter(state, guard, deliveries));
  if (options.control) app.use('/__control', controlRouter(state, faults, deliveries));
  app.get('/', (_req, res) => {
    res
      .type('html')
      .send(
        page(
          'Rewards service sandbox',
          '<p>An emulator of the rewards service: <code>/oauth/authorize</code>, <code>/oauth/token</code> and <code>/api/v2/...</code>.</p>',
        ),
      );
  });
  app.use((_req, res) => res.status(404).json({ errors: { message: 'Not found', payload: {} } }));
  app.use((error: { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
    const status = error?.status && error.status >= 400 && error.status < 500 ? error.status : 500;
    res
      .status(status)
      .json({ errors: { message: status === 500 ? 'Internal server error' : 'Bad request', payload: {} } });
  });
  // Expired tokens, codes and consents go on a timer too (not only when tokens are issued).
  const sweeper = setInterval(() => {
    if (state.sweep() > 0) persister?.markDirty();
  }, state.limits.sweepIntervalMs);
  sweeper.unref();
  const ready = (persister?.ready ?? Promise.resolve()).then(() => deliveries.resume());
  return {
    app,
    state,
    faults,
    deliveries,
    ready,
    persister,
    close: async () => {
      clearInterval(sweeper);
      deliveries.close();
      await persister?.close();
    },
  };
}
