import { escapeHtml as e } from '../common/html';
import {
  CREATE_API_KEY,
  CREATE_TENANT,
  LATEST_DISPATCH,
  SEND_REWARD,
  connectSession,
  variables,
} from './first-steps';

/** What `GET /` answers in JSON: where to go next. */
export function homeLinks(publicBaseUrl: string) {
  return {
    name: 'Rewards Gateway',
    docs: `${publicBaseUrl}/docs`,
    ops: `${publicBaseUrl}/ops`,
    health: `${publicBaseUrl}/health/ready`,
  };
}

/**
 * The start page: links, and the README's first hour with this gateway's address. No script (PAGE_CSP). Public:
 * never a key; the operator key's file only on a demo gateway that generated it.
 */
export function homePage(publicBaseUrl: string, operatorKeyFile?: string): string {
  const code = (lines: string[]) => `<pre><code>${e(lines.join('\n'))}</code></pre>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rewards Gateway</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f7f9; }
  header { background: #111827; color: #fff; padding: 1rem 1.5rem; } h1 { font-size: 1.3rem; margin: 0; }
  header p { margin: .3rem 0 0; color: #d1d5db; }
  main { padding: 1rem 1.5rem; max-width: 80rem; }
  nav ul { list-style: none; padding: 0; display: flex; gap: 1rem; flex-wrap: wrap; }
  nav a { display: inline-block; background: #fff; border: 1px solid #d1d5db; border-radius: 6px; padding: .5rem .9rem;
          font-weight: 600; color: #1d4ed8; text-decoration: none; } nav a:hover { border-color: #1d4ed8; }
  nav .muted { display: block; font-weight: 400; }
  .muted { color: #6b7280; font-size: .85em; } h2 { font-size: 1.1rem; margin-top: 1.5rem; }
  ol > li { margin-bottom: 1rem; }
  pre { background: #111827; color: #e5e7eb; padding: .6rem .8rem; border-radius: 6px; font-size: 13px;
        white-space: pre-wrap; overflow-wrap: anywhere; }
</style></head>
<body><header><h1>Rewards Gateway</h1>
<p>Sends rewards through the rewards service on behalf of each tenant, with the account the tenant connected.</p></header>
<main>
<nav><ul>
  <li><a href="/docs" id="docs">API docs<span class="muted">every endpoint and schema</span></a></li>
  <li><a href="/ops" id="ops">Ops dashboard<span class="muted">user: any, password: the operator key</span></a></li>
  <li><a href="/health/ready" id="health">Readiness<span class="muted">database and vault keys</span></a></li>
</ul></nav>
<h2 id="quick-start">The first hour</h2>
<p>The README's first hour in four steps. The operator key creates the tenant and its key; everything after that uses
the tenant's own key.</p>
${code(variables(publicBaseUrl, operatorKeyFile))}
<ol>
  <li><strong>Create a tenant</strong> and an API key for one of its services (the answer shows the key once;
  <code>$API_KEY</code> keeps it):
  ${code([...CREATE_TENANT, ...CREATE_API_KEY])}</li>
  <li><strong>Connect its rewards account</strong>: create a one-time connect link, open its <code>connect_url</code> in a
  browser, <em>Connect rewards account</em>, then <em>Approve</em> at the rewards service; the gateway's
  <em>Rewards account connected</em> page ends it.
  ${code(connectSession('API_KEY'))}</li>
  <li><strong>Send a reward</strong> (custom fields by label; the <code>Idempotency-Key</code> makes a retry safe):
  ${code(SEND_REWARD)}</li>
  <li><strong>Watch its delivery</strong>: the reward's <code>delivery.state</code> goes from <code>pending</code> to
  <code>delivered</code> a few seconds later.
  ${code(LATEST_DISPATCH)}</li>
</ol>
<p class="muted">The full walk-through, with tenant webhooks and their signatures, is in README.md, "The first hour";
<code>Accept: application/json</code> on this address answers where the docs, the dashboard and readiness are.</p>
</main></body></html>`;
}
