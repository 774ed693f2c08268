import { escapeHtml as e } from '../common/html';
import { REWARDS_ENVIRONMENTS } from '../config/app-config';
import type { FailingEndpoint } from '../tenant-webhooks/webhook.store';
import type { ActivityMinute, ConnectionSummary } from './dashboard.data';
import { LOCAL_TIMES_SCRIPT } from './local-times';
import { CONNECTION_HEALTHS, CONNECTION_STATUSES } from './ops.service';
import type { ConnectionEvent, ConnectionHealthView } from './ops.service';
import { RUNNING_BATCHES_SHOWN, type RunningBatch } from './running-batches';

const HEALTH_COLOURS: Record<string, string> = {
  healthy: '#15803d',
  degraded: '#b45309',
  broken: '#b91c1c',
  idle: '#6b7280',
};

function select(name: string, values: readonly string[], current?: string): string {
  return `<label>${name} <select name="${name}"><option value="">all</option>${values
    .map((v) => `<option${v === current ? ' selected' : ''}>${e(v)}</option>`)
    .join('')}</select></label>`;
}

const REWARD_STATUS_LABELS: [keyof RunningBatch['counts'], string][] = [
  ['sent', 'sent'],
  ['pending_approval', 'awaiting approval'],
  ['failed', 'failed'],
  ['cancelled', 'cancelled'],
  ['sending', 'sending'],
  ['pending', 'pending'],
];

function batchesSection(batches: RunningBatch[]): string {
  const rows = batches
    .map((b) => {
      const percent = b.total ? Math.floor((b.done / b.total) * 100) : 0;
      const breakdown = REWARD_STATUS_LABELS.filter(([s]) => b.counts[s] > 0)
        .map(([s, label]) => `<span class="count-${s}">${b.counts[s]} ${label}</span>`)
        .join(' · ');
      return `<tr data-dispatch="${e(b.id)}" data-tenant="${e(b.tenant_id)}">
        <td data-label="Tenant"><strong>${e(b.tenant_name)}</strong><br><span class="muted">${e(b.tenant_id)}</span></td>
        <td data-label="Dispatch"><code>${e(b.id)}</code><br><span class="muted">${b.priority === 1 ? 'bulk' : 'interactive'}</span></td>
        <td data-label="Created">${when(b.created_at.toISOString())}</td>
        <td data-label="Status">${e(b.status)}${b.cancel_requested_at ? `<br><span class="muted">cancel requested ${when(b.cancel_requested_at.toISOString())}</span>` : ''}</td>
        <td class="progress" data-label="Progress"><progress value="${b.done}" max="${b.total}" aria-label="${b.done} of ${b.total} rewards done">${percent} %</progress>
          <span class="done">${b.done} / ${b.total} done (${percent} %)</span><br><span class="muted">${breakdown || 'no rewards yet'}</span></td>
      </tr>`;
    })
    .join('');
  return `<section id="batches"><h2>Running batches</h2>
<div class="scroll" role="region" aria-label="Running batches" tabindex="0"><table class="batches stack"><thead><tr><th>Tenant</th><th>Dispatch</th><th>Created</th><th>Status</th><th>Progress</th></tr></thead>
<tbody>${rows || '<tr><td colspan="5">No batches running.</td></tr>'}</tbody></table></div>
<p class="muted">Dispatches of more than one reward still queued or sending, newest first (at most ${RUNNING_BATCHES_SHOWN}).</p></section>`;
}

export interface DashboardOverview {
  summary?: ConnectionSummary;
  activity?: ActivityMinute[];
  failingEndpoints?: FailingEndpoint[];
}

export const FAILING_ENDPOINTS_SHOWN = 20;

function summarySection(summary: ConnectionSummary): string {
  const card = (kind: 'status' | 'health', value: string, n: number) =>
    `<li class="card ${kind}-${e(value)}" data-${kind}="${e(value)}" data-count="${n}"><a href="/ops?${kind}=${e(value)}#connections"><span class="n">${n}</span> <span class="label">${e(value.replace('_', ' '))}</span></a></li>`;
  const live = summary.status.active + summary.status.needs_reauth + summary.status.error;
  return `<section id="summary" aria-labelledby="summary-title"><h2 id="summary-title">Summary</h2>
<p class="muted">${live} live connection${live === 1 ? '' : 's'}; ${summary.status.disconnected} disconnected (kept as history).</p>
<h3>By status</h3><ul class="cards" aria-label="Connections by status">${CONNECTION_STATUSES.map((s) => card('status', s, summary.status[s])).join('')}</ul>
<h3>By health</h3><ul class="cards" aria-label="Connections by health">${CONNECTION_HEALTHS.map((h) => card('health', h, summary.health[h])).join('')}</ul>
</section>`;
}

/** A step of 1, 2 or 5 × 10^k such that about four steps reach `max`. */
function niceStep(max: number): number {
  const rough = Math.max(max / 4, 1);
  const power = 10 ** Math.floor(Math.log10(rough));
  return [1, 2, 5].map((m) => m * power).find((s) => s >= rough) ?? power * 10;
}

const SENT_COLOUR = '#2563eb';
const FAILED_COLOUR = '#dc2626';
const num = (v: number) => String(Math.round(v * 10) / 10);
const ago = (minutes: number) => (minutes === 0 ? 'this minute' : `${minutes} min ago`);

/** Sends (bars) and failures (a line) per minute over the last hour as inline SVG, labelled with the totals. */
export function activityPlot(minutes: ActivityMinute[]): string {
  const [width, height, left, right, top, bottom] = [480, 180, 34, 8, 10, 24];
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  const n = Math.max(minutes.length, 1);
  const slot = plotWidth / n;
  const sent = minutes.reduce((sum, m) => sum + m.sent, 0);
  const failed = minutes.reduce((sum, m) => sum + m.failed, 0);
  const peak = Math.max(0, ...minutes.map((m) => m.sent));
  const highest = Math.max(1, peak, ...minutes.map((m) => m.failed));
  const step = niceStep(highest);
  const yMax = step * Math.ceil(highest / step);
  const y = (v: number) => top + plotHeight - (v / yMax) * plotHeight;
  const x = (i: number) => left + i * slot + slot / 2;
  const grid: string[] = [];
  for (let v = 0; v <= yMax; v += step) {
    grid.push(
      `<line x1="${left}" x2="${width - right}" y1="${num(y(v))}" y2="${num(y(v))}" stroke="${v === 0 ? '#6b7280' : '#e5e7eb'}"/>`,
      `<text x="${left - 4}" y="${num(y(v) + 4)}" text-anchor="end">${v}</text>`,
    );
  }
  const xLabels = [
    [0, '−1 h', 'start'],
    [n - 46, '−45 min', 'middle'],
    [n - 31, '−30 min', 'middle'],
    [n - 16, '−15 min', 'middle'],
    [n - 1, 'now', 'end'],
  ] as const;
  const axis = xLabels
    .filter(([i]) => i >= 0 && i < n)
    .map(
      ([i, label, anchor]) =>
        `<line x1="${num(x(i))}" x2="${num(x(i))}" y1="${top + plotHeight}" y2="${top + plotHeight + 4}" stroke="#6b7280"/><text x="${num(anchor === 'start' ? left : anchor === 'end' ? width - right : x(i))}" y="${height - 6}" text-anchor="${anchor}">${label}</text>`,
    )
    .join('');
  const bars = minutes
    .map((m, i) =>
      m.sent > 0
        ? `<rect class="sent" data-minute="${m.minute.toISOString()}" data-count="${m.sent}" x="${num(left + i * slot + slot * 0.15)}" y="${num(y(m.sent))}" width="${num(slot * 0.7)}" height="${num((m.sent / yMax) * plotHeight)}" fill="${SENT_COLOUR}"><title>${m.sent} sent, ${ago(n - 1 - i)}</title></rect>`
        : '',
    )
    .join('');
  const line = `<polyline class="failed-line" points="${minutes.map((m, i) => `${num(x(i))},${num(y(m.failed))}`).join(' ')}" fill="none" stroke="${FAILED_COLOUR}" stroke-width="1.5" stroke-linejoin="round"/>`;
  const points = minutes
    .map((m, i) =>
      m.failed > 0
        ? `<circle class="failed" data-minute="${m.minute.toISOString()}" data-count="${m.failed}" cx="${num(x(i))}" cy="${num(y(m.failed))}" r="3" fill="${FAILED_COLOUR}"><title>${m.failed} failed, ${ago(n - 1 - i)}</title></circle>`
        : '',
    )
    .join('');
  const label = `Rewards per minute over the last hour: ${sent} sent, ${failed} failed${peak > 0 ? `; at most ${peak} sent in one minute` : ''}.`;
  return `<svg class="plot" viewBox="0 0 ${width} ${height}" role="img" aria-label="${e(label)}" data-sent-total="${sent}" data-failed-total="${failed}" font-size="12" font-family="system-ui, sans-serif" fill="#374151">
<title>Sends and failures per minute, last hour</title>
${grid.join('')}${axis}${bars}${minutes.length ? line : ''}${points}</svg>`;
}

function activitySection(minutes: ActivityMinute[]): string {
  const sent = minutes.reduce((sum, m) => sum + m.sent, 0);
  const failed = minutes.reduce((sum, m) => sum + m.failed, 0);
  const first = minutes[0]?.minute;
  const last = minutes.at(-1)?.minute;
  const window =
    first && last
      ? ` from ${when(first.toISOString())} to ${when(new Date(last.getTime() + 60_000).toISOString())}`
      : '';
  return `<section id="activity" aria-labelledby="activity-title"><h2 id="activity-title">Last hour</h2>
<figure>${activityPlot(minutes)}
<figcaption><span class="swatch sent"></span> sent <strong id="sent-total">${sent}</strong> · <span class="swatch failed"></span> failed <strong id="failed-total">${failed}</strong>
<span class="muted">— rewards per minute${window}</span></figcaption></figure></section>`;
}

function failingEndpointsSection(endpoints: FailingEndpoint[]): string {
  const rows = endpoints
    .map(
      (
        w,
      ) => `<tr data-endpoint="${e(w.endpoint_id)}" data-tenant="${e(w.tenant_id)}" class="${w.disabled ? 'disabled' : 'failing'}">
        <td data-label="Tenant">${e(w.tenant_id)}</td>
        <td class="url" data-label="URL"><code>${e(w.url)}</code></td>
        <td data-label="Failing since">${when(w.failing_since ? new Date(w.failing_since).toISOString() : null)}</td>
        <td class="failures" data-label="Consecutive failures">${w.consecutive_failures}</td>
        <td data-label="State">${
          w.disabled
            ? `<strong>disabled</strong> ${when(w.disabled_at ? new Date(w.disabled_at).toISOString() : null)}${w.disabled_reason ? `<br><span class="muted">${e(w.disabled_reason)}</span>` : ''}`
            : 'failing, retrying'
        }${w.last_error ? `<br><span class="muted">last error: ${e(w.last_error)}</span>` : ''}</td>
      </tr>`,
    )
    .join('');
  return `<section id="webhooks" aria-labelledby="webhooks-title"><h2 id="webhooks-title">Tenant webhook endpoints failing</h2>
<div class="scroll" role="region" aria-label="Failing webhook endpoints" tabindex="0"><table class="webhooks stack"><thead><tr><th>Tenant</th><th>URL</th><th>Failing since</th><th>Consecutive failures</th><th>State</th></tr></thead>
<tbody>${rows || '<tr><td colspan="5">No endpoint failing.</td></tr>'}</tbody></table></div>
<p class="muted">Disabled endpoints first, then the longest failing (at most ${FAILING_ENDPOINTS_SHOWN}).</p></section>`;
}

/**
 * The operators' one-page view: summary, last hour, running batches, failing webhook endpoints, then every connection
 * with its events and Check / Refresh. On a phone every table row becomes a card of labelled lines.
 */
export function dashboardPage(
  connections: ConnectionHealthView[],
  events: ConnectionEvent[],
  filters: Record<string, string | undefined>,
  csrf: string,
  flash?: string,
  paging: { offset: number; next: number | null; pageSize: number } = {
    offset: 0,
    next: null,
    pageSize: 100,
  },
  batches: RunningBatch[] = [],
  overview: DashboardOverview = {},
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
  const byConnection = new Map<string, ConnectionEvent[]>();
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
        <td data-label="Tenant"><strong>${e(c.tenant_name)}</strong><br><span class="muted">${e(c.tenant_id)}</span></td>
        <td data-label="Env">${e(c.environment)}${c.organization ? `<br><span class="muted" data-organization="${e(c.organization.id)}">${e(c.organization.name ?? c.organization.id)}</span>` : ''}</td>
        <td data-label="Status">${e(c.status)}</td>
        <td data-label="Health"><span class="badge" style="background:${colour}">${e(c.health ?? '—')}</span></td>
        <td data-label="Last refresh">${when(c.last_refreshed_at)}<br><span class="muted">expires ${when(c.access_expires_at)}</span></td>
        <td data-label="Last use">${when(c.last_used_at)}</td>
        <td data-label="Last error">${c.last_error ? `<strong>${e(c.last_error.code)}</strong><br><span class="muted">${e(c.last_error.message ?? '')}</span>` : '—'}${
          c.last_probe
            ? `<br><span class="muted">probe ${c.last_probe.ok ? 'ok' : `failed: ${e(c.last_probe.error ?? '')}`}</span>`
            : ''
        }</td>
        <td data-label="Failures / refreshes">${c.consecutive_failures} / ${c.refresh_count}</td>
        <td data-label="24 h sent / failed / queued">${c.dispatches_24h.sent} / ${c.dispatches_24h.failed} / ${c.dispatches_24h.queued}</td>
        <td class="actions">${action('check', 'Check')}${action('refresh', 'Refresh')}<a class="activity" data-action="activity" href="/ops/connections/${e(c.id)}">Activity</a></td>
      </tr>
      <tr class="events"><td colspan="10"><details><summary>Events</summary><ul>${evs || '<li>none</li>'}</ul></details></td></tr>`;
    })
    .join('');
  return opsPage(
    'Rewards Gateway ops',
    `  form.filters { margin-bottom: 1rem; display: flex; gap: 1rem; flex-wrap: wrap; align-items: center; }
  tr.health-broken > td { background: #fef2f2; } tr.health-degraded > td { background: #fffbeb; }
  tr.events td { padding-top: 0; border-bottom: 2px solid #e5e7eb; } details ul { margin: .3rem 0; padding-left: 1.2rem; }
  .actions form { display: inline; } button { font: inherit; padding: .25rem .7rem; margin: 0 .2rem .2rem 0; cursor: pointer; }
  .pager { display: flex; gap: 1rem; align-items: center; } .pager a { font-weight: 600; }
  .flash { background: #eff6ff; border: 1px solid #bfdbfe; padding: .5rem .8rem; margin-bottom: 1rem; }
  #batches { margin-bottom: 1.5rem; }
  td.progress { min-width: 16rem; } progress { width: 12rem; height: 1rem; vertical-align: middle; margin-right: .5rem; }
  h3 { font-size: .85rem; margin: .6rem 0 .3rem; color: #4b5563; font-weight: 600; }
  .card a { display: block; background: #fff; border: 1px solid #e5e7eb; border-top: 4px solid #9ca3af; border-radius: 6px; padding: .45rem .7rem; color: inherit; text-decoration: none; }
  .card a:hover, .card a:focus { border-color: #6b7280; }
  .card.status-active a, .card.health-healthy a { border-top-color: #15803d; } .card.status-needs_reauth a, .card.health-broken a { border-top-color: #b91c1c; }
  .card.status-error a, .card.health-degraded a { border-top-color: #b45309; } .card.status-disconnected a, .card.health-idle a { border-top-color: #6b7280; }
  figure { margin: 0; background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: .5rem; max-width: 44rem; }
  svg.plot { display: block; width: 100%; height: auto; } figcaption { padding: .3rem .2rem 0; }
  .swatch { display: inline-block; width: .8em; height: .8em; border-radius: 2px; vertical-align: -.05em; }
  .swatch.sent { background: ${SENT_COLOUR}; } .swatch.failed { background: ${FAILED_COLOUR}; }
  table.connections { min-width: 60rem; } table.batches { min-width: 40rem; } table.webhooks { min-width: 36rem; }
  td.url code { word-break: break-all; } tr.disabled > td { background: #fef2f2; }
  .flash, tr.events code { overflow-wrap: anywhere; }`,
    `    table.stack tr:not(.events) { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); }
    table.stack td:first-child, table.stack td[colspan], table.stack td.actions, table.stack td.progress,
    table.stack td.url, table.stack td:last-child { grid-column: 1 / -1; }
    table.connections tr[data-connection] { margin-bottom: 0; border-bottom: 0; border-radius: 6px 6px 0 0; }
    table.connections tr.events { border-top: 0; border-radius: 0 0 6px 6px; }
    table.connections td.actions { padding: .4rem .7rem; } td.progress { min-width: 0; } progress { width: 100%; }`,
    `${flash ? `<p class="flash" id="flash">${e(flash)}</p>` : ''}
${overview.summary ? summarySection(overview.summary) : ''}
${overview.activity ? activitySection(overview.activity) : ''}
${batchesSection(batches)}
${overview.failingEndpoints ? failingEndpointsSection(overview.failingEndpoints) : ''}
<h2 id="connections">Connections</h2>
<form class="filters" method="get" action="/ops">
  ${select('status', CONNECTION_STATUSES, filters.status)}
  ${select('health', CONNECTION_HEALTHS, filters.health)}
  ${select('environment', REWARDS_ENVIRONMENTS, filters.environment)}
  <label>tenant <input name="tenant" value="${e(filters.tenant ?? '')}" size="14"></label>
  <button type="submit">Filter</button>
</form>
<div class="scroll" id="connections-table" role="region" aria-label="Connections" tabindex="0"><table class="connections stack"><thead><tr><th>Tenant</th><th>Env</th><th>Status</th><th>Health</th><th>Last refresh</th><th>Last use</th><th>Last error</th>
<th>Failures / refreshes</th><th>24 h sent / failed / queued</th><th></th></tr></thead>
<tbody>${rows || '<tr><td colspan="10">No connections match.</td></tr>'}</tbody></table></div>
${pager}`,
  );
}

/** Every time on the ops pages: UTC text in a `<time>`, which the pages' one script rewrites in the viewer's zone. */
export const when = (iso: string | null) =>
  iso ? `<time datetime="${e(iso)}">${e(iso.replace('T', ' ').slice(0, 19))} UTC</time>` : '—';

/** The ops pages' frame: the shared look, the page's own `css` and `phoneCss` (under 40rem), the one script. */
export function opsPage(title: string, css: string, phoneCss: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f7f9; }
  header { background: #111827; color: #fff; padding: .8rem 1.5rem; display: flex; flex-wrap: wrap; gap: .2rem 1rem; align-items: baseline; justify-content: space-between; }
  h1 { font-size: 1.15rem; margin: 0; } header .tz { margin: 0; font-size: .85em; color: #d1d5db; }
  main { padding: 1rem 1.5rem; } h2 { font-size: 1rem; margin: 1.2rem 0 .5rem; }
  .muted { color: #6b7280; font-size: .85em; } .badge { color: #fff; padding: .1rem .5rem; border-radius: 999px; font-weight: 600; }
  ul.cards { list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: repeat(auto-fit, minmax(7.5rem, 1fr)); gap: .5rem; }
  .card .n { display: block; font-size: 1.5rem; font-weight: 700; line-height: 1.2; }
  table { border-collapse: collapse; width: 100%; background: #fff; } th, td { padding: .45rem .6rem; border-bottom: 1px solid #e5e7eb; text-align: left; vertical-align: top; }
  th { background: #f3f4f6; font-weight: 600; } .scroll { max-width: 100%; overflow-x: auto; } .scroll:focus { outline: 2px solid #93c5fd; }
${css}
  @media (max-width: 40rem) {
    header { padding: .7rem 1rem; } main { padding: .75rem 1rem; }
    /* On a phone each row is a card, one labelled cell a line: every button and link in sight, nothing to scroll. */
    table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; min-width: 0; }
    table.stack { background: none; }
    table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
    table.stack tr { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; margin-bottom: .6rem; }
    table.stack td { border-bottom: 0; padding: .25rem .7rem; }
    table.stack td[data-label]::before { content: attr(data-label); display: block; font-size: .75em; font-weight: 600; color: #6b7280; }
${phoneCss}
  }
</style></head>
<body><header><h1>Rewards Gateway · ops</h1><p class="tz">Times in <span id="tz">UTC</span></p></header><main>
${body}
</main><script>${LOCAL_TIMES_SCRIPT}</script></body></html>`;
}
