import { escapeHtml } from '../common/html';

export function connectPage(title: string, body: string, status: 'info' | 'ok' | 'error' = 'info'): string {
  const accent = status === 'ok' ? '#15803d' : status === 'error' ? '#b91c1c' : '#2563eb';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
  body { font: 16px/1.55 system-ui, sans-serif; background: #f5f6f8; color: #1f2328; margin: 0; }
  main { max-width: 34rem; margin: 4rem auto; background: #fff; padding: 2rem 2.25rem; border-radius: 14px; box-shadow: 0 1px 6px #0002; border-top: 5px solid ${accent}; }
  h1 { font-size: 1.45rem; margin: 0 0 1rem; } dt { font-weight: 600; } dd { margin: 0 0 .6rem; }
  a.button { display: inline-block; background: ${accent}; color: #fff; padding: .75rem 1.4rem; border-radius: 9px; text-decoration: none; font-weight: 600; }
  .muted { color: #57606a; font-size: .92rem; }
</style></head><body><main>${body.replace('%TITLE%', `<h1>${escapeHtml(title)}</h1>`)}</main></body></html>`;
}

/** The connect link's page; `returnUrl` (parsed by the caller) null when the gateway shows its own final page. */
export function connectLandingPage(
  tenantName: string,
  environment: string,
  scopes: string[],
  authorizeHref: string,
  returnUrl: string | null,
): string {
  const scopeText: Record<string, string> = {
    default: 'send rewards and read fields, funding sources, orders and rewards',
    team_management: 'manage members, organizations and webhooks',
  };
  return connectPage(
    `Connect your rewards account`,
    `%TITLE%
     <p><strong>${escapeHtml(tenantName)}</strong> asks to send rewards through your rewards account.</p>
     <dl><dt>Environment</dt><dd>${escapeHtml(environment)}</dd>
     <dt>Permissions requested</dt><dd><ul>${scopes.map((s) => `<li><code>${escapeHtml(s)}</code>: ${escapeHtml(scopeText[s] ?? s)}</li>`).join('')}</ul></dd></dl>
     <p class="muted" id="next">Next: you sign in at the rewards service and approve. ${
       returnUrl
         ? `You are then sent back to <strong>${escapeHtml(new URL(returnUrl).host)}</strong>, and the connection is active.`
         : 'You then come back to a page of this gateway that confirms it: the connection is active.'
     }
     You can disconnect at any time.</p>
     <p><a class="button" id="connect" href="${escapeHtml(authorizeHref)}">Connect rewards account</a></p>`,
  );
}
