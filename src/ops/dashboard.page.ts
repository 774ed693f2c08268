import { escapeHtml as e } from '../common/html';
import type { ConnectionHealthView } from './ops.service';

export interface DashboardEvent {
  connection_id: string;
  type: string;
  detail: unknown;
  at: Date;
}

const HEALTH_COLOURS: Record<string, string> = {
  healthy: '#15803d',
  degraded: '#b45309',
  broken: '#b91c1c',
  idle: '#6b7280',
};

const when = (iso: string | null) =>
  iso ? `<time datetime="${e(iso)}">${e(iso.replace('T', ' ').slice(0, 19))}</time>` : '—';

function select(name: string, values: string[], current?: string): string {
  return `<label>${name} <select name="${name}"><option value="">all</option>${values
    .map((v) => `<option${v === current ? ' selected' : ''}>${e(v)}</option>`)
    .join('')}</select></label>`;
}

/** The operators' one-page view: every connection, coloured by health, with its events and Check / Refresh. */
export function dashboardPage(
  connections: ConnectionHealthView[],
  events: DashboardEvent[],
  filters: Record<string, string | undefined>,
  csrf: string,
  flash?: string,
  paging: { offset: number; next: number | null; pageSize: number } = {
    offset: 0,
    next: null,
    pageSize: 100,
  },
): string {
  const link = (offset: number, label: string, rel: string) => {
    const params = new URLSearchParams(
      Object.entries(filters).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== ''),
    );
    params.set('offset', String(offset));
    return `<a rel="${rel}" href="/ops?${e(params.toString())}">${label}</a>`;
  };
  const pager = `<p class="pager">${paging.offset > 0 ? link(Math.max(0, paging.offset - paging.pageSize), '← previous', 'prev') : ''}
    <span class="muted">rows ${paging.offset + 1}–${paging.offset + connections.length}</span>
    ${paging.next !== null ? link(paging.next, 'next →', 'next') : ''}</p>`;
  const byConnection = new Map<string, DashboardEvent[]>();
  for (const ev of events)
    byConnection.set(ev.connection_id, [...(byConnection.get(ev.connection_id) ?? []), ev]);
  const rows = connections
    .map((c) => {
      const colour = HEALTH_COLOURS[c.health ?? ''] ?? '#6b7280';
      const evs = (byConnection.get(c.id) ?? [])
        .map(
          (ev) =>
            `<li>${when(ev.at.toISOString())} <strong>${e(ev.type)}</strong> <code>${e(JSON.stringify(ev.detail)).slice(0, 300)}</code></li>`,
        )
        .join('');
      const action = (name: string, label: string) =>
        `<form method="post" action="/ops/connections/${e(c.id)}/${name}"><input type="hidden" name="csrf" value="${e(csrf)}"><button type="submit" data-action="${name}">${label}</button></form>`;
      return `<tr class="health-${e(c.health ?? 'none')}" data-connection="${e(c.id)}" data-tenant="${e(c.tenant_id)}">
        <td><strong>${e(c.tenant_name)}</strong><br><span class="muted">${e(c.tenant_id)}</span></td>
        <td>${e(c.environment)}</td>
        <td>${e(c.status)}</td>
        <td><span class="badge" style="background:${colour}">${e(c.health ?? '—')}</span></td>
        <td>${when(c.last_refreshed_at)}<br><span class="muted">expires ${when(c.access_expires_at)}</span></td>
        <td>${when(c.last_used_at)}</td>
        <td>${c.last_error ? `<strong>${e(c.last_error.code)}</strong><br><span class="muted">${e(c.last_error.message ?? '')}</span>` : '—'}${
          c.last_probe
            ? `<br><span class="muted">probe ${c.last_probe.ok ? 'ok' : `failed: ${e(c.last_probe.error ?? '')}`}</span>`
            : ''
        }</td>
        <td>${c.consecutive_failures} / ${c.refresh_count}</td>
        <td>${c.dispatches_24h.sent} / ${c.dispatches_24h.failed} / ${c.dispatches_24h.queued}</td>
        <td class="actions">${action('check', 'Check')}${action('refresh', 'Refresh')}</td>
      </tr>
      <tr class="events"><td colspan="10"><details><summary>Events</summary><ul>${evs || '<li>none</li>'}</ul></details></td></tr>`;
    })
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connections · Rewards Gateway ops</title>
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f7f9; }
  header { background: #111827; color: #fff; padding: .8rem 1.5rem; } h1 { font-size: 1.15rem; margin: 0; }
  main { padding: 1rem 1.5rem; } form.filters { margin-bottom: 1rem; display: flex; gap: 1rem; flex-wrap: wrap; align-items: center; }
  table { border-collapse: collapse; width: 100%; background: #fff; } th, td { padding: .45rem .6rem; border-bottom: 1px solid #e5e7eb; text-align: left; vertical-align: top; }
  th { background: #f3f4f6; font-weight: 600; } .muted { color: #6b7280; font-size: .85em; }
  .badge { color: #fff; padding: .1rem .5rem; border-radius: 999px; font-weight: 600; }
  tr.health-broken > td { background: #fef2f2; } tr.health-degraded > td { background: #fffbeb; }
  tr.events td { padding-top: 0; border-bottom: 2px solid #e5e7eb; } details ul { margin: .3rem 0; padding-left: 1.2rem; }
  .actions form { display: inline; } button { font: inherit; padding: .25rem .7rem; margin: 0 .2rem .2rem 0; cursor: pointer; }
  .pager { display: flex; gap: 1rem; align-items: center; } .pager a { font-weight: 600; }
  .flash { background: #eff6ff; border: 1px solid #bfdbfe; padding: .5rem .8rem; margin-bottom: 1rem; }
</style></head>
<body><header><h1>Rewards Gateway · connections</h1></header><main>
${flash ? `<p class="flash" id="flash">${e(flash)}</p>` : ''}
<form class="filters" method="get" action="/ops">
  ${select('status', ['active', 'needs_reauth', 'error', 'disconnected'], filters.status)}
  ${select('health', ['healthy', 'degraded', 'broken', 'idle'], filters.health)}
  ${select('environment', ['sandbox', 'production'], filters.environment)}
  <label>tenant <input name="tenant" value="${e(filters.tenant ?? '')}" size="14"></label>
  <button type="submit">Filter</button>
</form>
<table><thead><tr><th>Tenant</th><th>Env</th><th>Status</th><th>Health</th><th>Last refresh</th><th>Last use</th><th>Last error</th>
<th>Failures / refreshes</th><th>24 h sent / failed / queued</th><th></th></tr></thead>
<tbody>${rows || '<tr><td colspan="10">No connections match.</td></tr>'}</tbody></table>
${pager}
</main></body></html>`;
}
