import type { NextFunction, Request, Response } from 'express';
import type { SandboxState } from './sandbox.state';

/**
 * A fault rule for one route (`token`, `authorize`, `organizations`, `fields`, `orders` (POST /orders), `order`
 * (GET /orders/:id), `order_list` (GET /orders), `order_approvals`, `rewards`, `reward`, `funding_sources`,
 * `products`, `campaigns`, `webhooks` (every `/webhooks` route), or `*`). When a request matches and the rule fires
 * (probability), in this order:
 * - `latency_ms`: wait before handling;
 * - `drop`: destroy the connection without an answer, before any work;
 * - `status`: answer that status without doing the work (429 carries `Retry-After: retry_after`, default 1, and
 *   the service's documented 429 body `{"error": {"message", "payload"}}`);
 * - `delay_after_work_ms` / `drop_after_work`: do the work, then answer late or never (a client that timed out
 *   cannot know the work was done).
 * `times` limits how often the rule fires; then it is removed.
 */
export interface FaultRule {
  route: string;
  latency_ms?: number;
  drop?: boolean;
  status?: number;
  retry_after?: number;
  delay_after_work_ms?: number;
  drop_after_work?: boolean;
  probability?: number;
  times?: number;
}

const ROUTES = [
  'token',
  'authorize',
  'organizations',
  'fields',
  'orders',
  'order',
  'order_list',
  'order_approvals',
  'rewards',
  'reward',
  'funding_sources',
  'products',
  'campaigns',
  'webhooks',
  '*',
];

export function validateFault(input: unknown): { rule?: FaultRule; error?: string } {
  if (!input || typeof input !== 'object') return { error: 'a fault must be an object' };
  const r = input as Record<string, unknown>;
  if (typeof r.route !== 'string' || !ROUTES.includes(r.route))
    return { error: `route must be one of ${ROUTES.join(', ')}` };
  const num = (k: string, min: number, max: number) =>
    r[k] === undefined || (typeof r[k] === 'number' && (r[k] as number) >= min && (r[k] as number) <= max);
  if (!num('latency_ms', 0, 120_000) || !num('delay_after_work_ms', 0, 120_000))
    return { error: 'latency_ms and delay_after_work_ms are 0 to 120000' };
  if (!num('status', 400, 599)) return { error: 'status must be 400 to 599' };
  if (!num('retry_after', 0, 3600)) return { error: 'retry_after must be 0 to 3600 seconds' };
  if (!num('probability', 0, 1)) return { error: 'probability must be 0 to 1' };
  if (!num('times', 1, 1_000_000)) return { error: 'times must be a positive whole number' };
  return { rule: { ...(r as unknown as FaultRule) } };
}

export class FaultInjector {
  rules: FaultRule[] = [];

  clear(): void {
    this.rules = [];
  }

  /** Express middleware for one named route. */
  middleware(state: SandboxState, route: string) {
    return (req: Request, res: Response, next: NextFunction): void => {
      state.count(route);
      const rule = this.pick(route);
      if (!rule) return next();
      const proceed = () => {
        if (rule.drop) {
          req.socket.destroy();
          return;
        }
        if (rule.status) {
          if (route === 'authorize') {
            res.status(rule.status).type('text').send('Service unavailable');
            return;
          }
          if (rule.status === 429) {
            res.setHeader('Retry-After', String(rule.retry_after ?? 1));
            res
              .status(429)
              .json(
                route === 'token'
                  ? { error: 'rate_limited' }
                  : { error: { message: 'Too many requests', payload: {} } },
              );
            return;
          }
          const message = rule.status >= 500 ? 'Internal server error' : 'Injected fault';
          res
            .status(rule.status)
            .json(route === 'token' ? { error: 'server_error' } : { errors: { message, payload: {} } });
          return;
        }
        if (rule.delay_after_work_ms !== undefined || rule.drop_after_work) this.afterWork(req, res, rule);
        next();
      };
      if (rule.latency_ms) setTimeout(proceed, rule.latency_ms).unref();
      else proceed();
    };
  }

  private pick(route: string): FaultRule | undefined {
    for (const rule of this.rules) {
      if (rule.route !== route && rule.route !== '*') continue;
      if (rule.probability !== undefined && Math.random() >= rule.probability) continue;
      if (rule.times !== undefined) {
        rule.times -= 1;
        if (rule.times <= 0) this.rules = this.rules.filter((r) => r !== rule);
      }
      return rule;
    }
    return undefined;
  }

  /** Lets the handler do its work, then holds back (or drops) the response it writes. */
  private afterWork(req: Request, res: Response, rule: FaultRule): void {
    const originalJson = res.json.bind(res);
    res.json = ((body: unknown) => {
      if (rule.drop_after_work) {
        req.socket.destroy();
        return res;
      }
      setTimeout(() => {
        if (!req.socket.destroyed) originalJson(body);
      }, rule.delay_after_work_ms).unref();
      return res;
    }) as Response['json'];
  }
}
