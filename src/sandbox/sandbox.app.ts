import express from 'express';
import type { Express, NextFunction, Request, Response } from 'express';
import { apiRouter } from './sandbox.api';
import { controlRouter } from './sandbox.control';
import { FaultInjector } from './sandbox.faults';
import type { SandboxClient, SandboxSettings } from './sandbox.state';
import { SandboxState } from './sandbox.state';
import { oauthRouter } from './sandbox.oauth';
import { page } from './sandbox.html';

export interface SandboxOptions {
  /** Registered developer apps (client id, secret, exact redirect URIs). */
  clients: SandboxClient[];
  /** Mount `/__control`. Never on in production. */
  control: boolean;
  settings?: Partial<SandboxSettings>;
}

export interface Sandbox {
  app: Express;
  state: SandboxState;
  faults: FaultInjector;
}

/**
 * The rewards-service emulator as a plain Express app: fast (it is benchmarked at thousands of orders a second),
 * mountable under `/sandbox` in the gateway, or served alone by `npm run sandbox`.
 */
export function createSandbox(options: SandboxOptions): Sandbox {
  const state = new SandboxState(options.clients, options.settings);
  const faults = new FaultInjector();
  const guard = (route: string) => faults.middleware(state, route);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use('/oauth', oauthRouter(state, guard));
  app.use('/api/v2', apiRouter(state, guard));
  if (options.control) app.use('/__control', controlRouter(state, faults));
  app.get('/', (_req, res) => {
    res.type('html').send(page('Rewards service sandbox', '<p>An emulator of the rewards service: <code>/oauth/authorize</code>, <code>/oauth/token</code> and <code>/api/v2/...</code>.</p>'));
  });
  app.use((_req, res) => res.status(404).json({ errors: { message: 'Not found', payload: {} } }));
  app.use((error: { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
    const status = error?.status && error.status >= 400 && error.status < 500 ? error.status : 500;
    res.status(status).json({ errors: { message: status === 500 ? 'Internal server error' : 'Bad request', payload: {} } });
  });
  return { app, state, faults };
}
