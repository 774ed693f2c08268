import type { IncomingMessage, ServerResponse } from 'node:http';
import helmet from 'helmet';
import { LOCAL_TIMES_SCRIPT_HASH } from '../ops/local-times';

type Middleware = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;
type Directives = Record<string, string[]>;

/**
 * Content-Security-Policy of the gateway's own answers: the HTML pages (connect page, OAuth result pages, the /ops
 * dashboard) and the JSON API. The pages load nothing — no script, no image, no font, no external style; their CSS is
 * one inline `<style>` block (and the dashboard's badge colours are `style` attributes), and their only forms post to
 * the gateway itself (the dashboard's Check / Refresh and filter forms). The connect page's button is a link.
 * `/ops` (and its connection pages) alone adds one inline script, by hash (OPS_CSP).
 */
export const PAGE_CSP: Directives = {
  'default-src': ["'none'"],
  'style-src': ["'unsafe-inline'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
  'base-uri': ["'none'"],
};

/**
 * The `/ops` dashboard: as PAGE_CSP, plus its one inline script (it shows every time in the viewer's time zone, see
 * src/ops/local-times.ts), allowed by its SHA-256 hash computed at start-up — no other script, inline or loaded, runs.
 */
const OPS_CSP: Directives = { ...PAGE_CSP, 'script-src': [LOCAL_TIMES_SCRIPT_HASH] };

/**
 * The built-in sandbox's pages (its consent page). As PAGE_CSP, except `form-action`: the consent form posts to the
 * sandbox's own `/oauth/authorize/decision`, which redirects to the client's redirect URI (the gateway's callback),
 * which redirects to the tenant's `return_url` — any origin on the tenant's allow-list. Chromium applies
 * `form-action` to every redirect of a form submission, so `'self'` would stop Approve / Deny at the last hop.
 */
const { 'form-action': _formAction, ...SANDBOX_CSP } = PAGE_CSP;

/**
 * Swagger UI at /docs: its scripts and stylesheet are files under /docs (no inline script; the init script is
 * `/docs/swagger-ui-init.js`), plus an inline `<style>` block and style attributes; its icons are data: URIs;
 * "Try it out" calls the API at `PUBLIC_BASE_URL` (the OpenAPI server).
 */
function docsCsp(publicBaseUrl: string): Directives {
  const api = new URL(publicBaseUrl).origin;
  return {
    'default-src': ["'none'"],
    'script-src': ["'self'"],
    'style-src': ["'self'", "'unsafe-inline'"],
    'img-src': ["'self'", 'data:'],
    'font-src': ["'self'", 'data:'],
    'connect-src': ["'self'", api],
    'form-action': ["'self'"],
    'frame-ancestors': ["'none'"],
    'base-uri': ["'none'"],
  };
}

/** One year; only ever sent when PUBLIC_BASE_URL is https (a browser on plain http ignores it anyway). */
const HSTS_MAX_AGE_SECONDS = 365 * 24 * 3600;

/**
 * The headers helmet sets for `directives`, recorded once at start-up: they are the same for every request (no nonce,
 * no directive computed per request), so helmet's chain of a dozen middlewares need not run on every request for a
 * dozen `setHeader` calls.
 */
function recordedHelmet(directives: Directives, https: boolean): (res: ServerResponse) => void {
  const middleware = helmet({
    contentSecurityPolicy: { useDefaults: false, directives },
    strictTransportSecurity: https ? { maxAge: HSTS_MAX_AGE_SECONDS, includeSubDomains: true } : false,
    xFrameOptions: { action: 'deny' },
    // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on our own form posts, which the
    // dashboard's CSRF check refuses; across origins nothing is sent either way (the connect URL's token stays ours).
    referrerPolicy: { policy: 'same-origin' },
    // Defaults kept: nosniff, Cross-Origin-Opener-Policy / Cross-Origin-Resource-Policy same-origin,
    // Origin-Agent-Cluster, X-DNS-Prefetch-Control off, X-Download-Options, X-Permitted-Cross-Domain-Policies none.
  }) as Middleware;
  const set: [string, string][] = [];
  const removed: string[] = [];
  const recorder = {
    setHeader: (name: string, value: unknown) => void set.push([name, String(value)]),
    removeHeader: (name: string) => void removed.push(name),
  } as unknown as ServerResponse;
  let completed = false;
  middleware({ headers: {} } as IncomingMessage, recorder, (error?: unknown) => {
    if (error) throw error;
    completed = true;
  });
  if (!completed) throw new Error('the security headers middleware did not complete at once');
  return (res) => {
    for (const [name, value] of set) res.setHeader(name, value);
    for (const name of removed) res.removeHeader(name);
  };
}

const DOCS_ASSET = /^\/docs\/[^/]+\.(js|css|png|map)$/;

/** A connection's page of the dashboard (`/ops/connections/{id}`): the same one script as `/ops`. */
const OPS_CONNECTION_PAGE = /^\/ops\/connections\/[0-9a-f-]{36}$/i;

/**
 * Security headers on every answer (helmet; the policy chosen by path), and `Cache-Control: no-store` on every
 * answer except Swagger UI's static files: API answers carry API keys, connect links and tenant data, the pages
 * carry one-time links and CSRF tokens — none of it belongs in a browser or proxy cache.
 */
export function securityHeaders(publicBaseUrl: string): (req: IncomingMessage, res: ServerResponse) => void {
  const https = publicBaseUrl.startsWith('https:');
  const page = recordedHelmet(PAGE_CSP, https);
  const ops = recordedHelmet(OPS_CSP, https);
  const sandbox = recordedHelmet(SANDBOX_CSP, https);
  const docs = recordedHelmet(docsCsp(publicBaseUrl), https);
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (!DOCS_ASSET.test(path)) res.setHeader('Cache-Control', 'no-store');
    const chosen =
      path === '/docs' || path.startsWith('/docs/')
        ? docs
        : path === '/sandbox' || path.startsWith('/sandbox/')
          ? sandbox
          : path === '/ops' || path === '/ops/' || OPS_CONNECTION_PAGE.test(path)
            ? ops
            : page;
    chosen(res);
  };
}
