import { escapeHtml as e } from '../common/html';

/** What `GET /` answers in JSON: where to go next (absolute URLs at PUBLIC_BASE_URL). */
export interface HomeLinks {
  name: string;
  docs: string;
  ops: string;
  health: string;
}

export function homeLinks(publicBaseUrl: string): HomeLinks {
  return {
    name: 'Rewards Gateway',
    docs: `${publicBaseUrl}/docs`,
    ops: `${publicBaseUrl}/ops`,
    health: `${publicBaseUrl}/health/ready`,
  };
}

const RETURN_URL = 'https://platform.example.com/settings/rewards';

/**
 * The start page: links to the API docs, the ops dashboard and readiness, and the README's quick start in three
 * steps with this gateway's address. Loads nothing (one inline `<style>`, no script): PAGE_CSP applies to `/`.
 * Public: it shows nothing a visitor could not learn from /docs (never a key, a path or a tenant).
 */
export function homePage(publicBaseUrl: string): string {
  const code = (text: string) => `<pre><code>${e(text)}</code></pre>`;
  const auth = '-H "Authorization: Bearer $OPERATOR_KEY" -H \'Content-Type: application/json\'';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rewards Gateway</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f7f9; }
  header { background: #111827; color: #fff; padding: 1rem 1.5rem; } h1 { font-size: 1.3rem; margin: 0; }
  header p { margin: .3rem 0 0; color: #d1d5db; }
  main { padding: 1rem 1.5rem; max-width: 56rem; }
  nav ul { list-style: none; padding: 0; display: flex; gap: 1rem; flex-wrap: wrap; }
  nav a { display: inline-block; background: #fff; border: 1px solid #d1d5db; border-radius: 6px; padding: .5rem .9rem;
          font-weight: 600; color: #1d4ed8; text-decoration: none; } nav a:hover { border-color: #1d4ed8; }
  nav .muted { display: block; font-weight: 400; }
  .muted { color: #6b7280; font-size: .85em; } h2 { font-size: 1.1rem; margin-top: 1.5rem; }
  ol > li { margin-bottom: 1rem; }
  pre { background: #111827; color: #e5e7eb; padding: .6rem .8rem; border-radius: 6px; overflow-x: auto; font-size: 13px; }
</style></head>
<body><header><h1>Rewards Gateway</h1>
<p>Sends rewards through the rewards service on behalf of each tenant, with the account the tenant connected.</p></header>
<main>
<nav><ul>
  <li><a href="/docs" id="docs">API docs<span class="muted">every endpoint and schema</span></a></li>
  <li><a href="/ops" id="ops">Ops dashboard<span class="muted">user: any, password: the operator key</span></a></li>
  <li><a href="/health/ready" id="health">Readiness<span class="muted">database and vault keys</span></a></li>
</ul></nav>
<h2 id="quick-start">Quick start</h2>
<p>The README's quick start in three steps. Calls need the operator key: the start-up banner says where it is kept.</p>
${code(`export GW=${publicBaseUrl}\nexport OPERATOR_KEY=$(cat .data/operator-api-key)`)}
<ol>
  <li><strong>Create a tenant</strong>, with the page its admins return to after connecting (<code>return_urls</code>),
  and an API key for one of its services (shown once):
  ${code(`curl -s -X POST $GW/v1/tenants ${auth} \\\n     -d '{"id":"acme","name":"Acme Corp","return_urls":["${RETURN_URL}"]}'\ncurl -s -X POST $GW/v1/tenants/acme/api-keys ${auth} -d '{"name":"payments-service"}'`)}</li>
  <li><strong>Connect its rewards account</strong>: create a one-time connect link, open its <code>connect_url</code> in a
  browser and approve; the browser comes back to the <code>return_url</code> with <code>?status=connected</code>.
  ${code(`curl -s -X POST $GW/v1/tenants/acme/connect-sessions ${auth} \\\n     -d '{"return_url":"${RETURN_URL}"}'`)}</li>
  <li><strong>Send a reward</strong> (custom fields by label; the <code>Idempotency-Key</code> makes a retry safe):
  ${code(`curl -s -X POST $GW/v1/tenants/acme/rewards ${auth} -H 'Idempotency-Key: payroll-2026-11-ada' \\\n     -d '{"rewards":[{"recipient":{"name":"Ada","email":"ada@example.com"},"value":{"denomination":25,"currency_code":"USD"},"products":["PRODAMAZONUS"],"custom_fields":{"Department":"Engineering"}}]}'`)}</li>
</ol>
<p class="muted">The full walk-through is in README.md, "Quick start"; <code>Accept: application/json</code> on this
address answers where the docs, the dashboard and readiness are.</p>
</main></body></html>`;
}
