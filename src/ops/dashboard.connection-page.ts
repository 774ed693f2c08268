import { escapeHtml as e } from '../common/html';
import type { ActivityRow, ActivitySummary } from '../connection-activity/activity.store';
import { opsPage, when } from './dashboard.page';
import type { ConnectionHealthView } from './ops.service';

/** The last hour's statistics cover at most this many of the connection's newest requests. */
export const SUMMARY_CAP = 10_000;
export const LATEST_CALLS_SHOWN = 50;

const ms = (v: number | null) =>
  v === null ? '—' : `${v < 10 ? Math.round(v * 10) / 10 : Math.round(v)} ms`;

const OUTCOME_COLOURS: Record<string, string> = {
  success: '#15803d',
  throttled: '#b45309',
  unauthorized: '#b45309',
  rejected: '#b91c1c',
  unavailable: '#b91c1c',
};

function summarySection(s: ActivitySummary): string {
  const rate = s.calls ? `${Math.round((s.errors / s.calls) * 1000) / 10} %` : '—';
  const card = (key: string, value: string, label: string) =>
    `<li class="card" data-stat="${key}"><span class="n">${e(value)}</span> <span class="label">${label}</span></li>`;
  return `<section id="calls-summary" aria-labelledby="calls-summary-title"><h2 id="calls-summary-title">Last hour</h2>
<ul class="cards" aria-label="Requests to the rewards service in the last hour">
${card('calls', String(s.calls), 'requests')}${card('error-rate', rate, `not successful (${s.errors})`)}${card('throttled', String(s.throttled), '429s')}${card('p50', ms(s.p50_ms), 'p50 latency')}${card('p95', ms(s.p95_ms), 'p95 latency')}
</ul><p class="muted">Every request made for this connection in the last hour${s.calls >= SUMMARY_CAP ? ` (the newest ${SUMMARY_CAP})` : ''}: orders, reads, probes, token refreshes.</p></section>`;
}

function callsSection(rows: ActivityRow[]): string {
  const body = rows
    .map(
      (r) => `<tr data-activity="${e(r.id)}" data-outcome="${e(r.outcome)}">
        <td data-label="When">${when(r.created_at.toISOString())}</td>
        <td data-label="Operation"><strong>${e(r.operation.replace('_', ' '))}</strong></td>
        <td data-label="Attempt">${r.attempt}${r.throttled_429 ? `<br><span class="muted">after ${r.throttled_429} × 429</span>` : ''}</td>
        <td data-label="Status">${r.http_status ?? 'no answer'}</td>
        <td data-label="Outcome"><span class="badge" style="background:${OUTCOME_COLOURS[r.outcome] ?? '#6b7280'}">${e(r.outcome)}</span>${r.error_code ? `<br><code>${e(r.error_code)}</code>` : ''}</td>
        <td data-label="Latency">${ms(r.latency_ms)}</td>
        <td data-label="Pacing wait">${ms(r.pacing_wait_ms)}</td>
        <td class="served" data-label="Dispatch · reward">${r.dispatch_id ? `<code>${e(r.dispatch_id)}</code>${r.reward_position !== null ? ` · #${r.reward_position}` : ''}` : '—'}</td>
      </tr>`,
    )
    .join('');
  return `<section id="latest-calls" aria-labelledby="latest-calls-title"><h2 id="latest-calls-title">Latest requests</h2>
<div class="scroll" id="calls-table" role="region" aria-label="Latest requests" tabindex="0"><table class="calls stack"><thead><tr><th>When</th><th>Operation</th><th>Attempt</th><th>Status</th><th>Outcome</th><th>Latency</th><th>Pacing wait</th><th>Dispatch · reward</th></tr></thead>
<tbody>${body || '<tr><td colspan="8">No request recorded.</td></tr>'}</tbody></table></div>
<p class="muted">The newest ${LATEST_CALLS_SHOWN}, newest first; the tenant lists them all (<code>GET /v1/tenants/{tenant}/connection/activity</code>).</p></section>`;
}

/** `/ops/connections/{id}`: one connection's last hour of requests (error rate, latency) and its latest requests. */
export function connectionPage(
  c: ConnectionHealthView,
  summary: ActivitySummary,
  rows: ActivityRow[],
): string {
  return opsPage(
    `${e(c.tenant_name)} · connection · Rewards Gateway ops`,
    `  a.back { font-weight: 600; }
  dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: .5rem 0; } dl.facts dt { font-weight: 600; color: #4b5563; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
  ul.cards { max-width: 48rem; }
  .card { background: #fff; border: 1px solid #e5e7eb; border-top: 4px solid #2563eb; border-radius: 6px; padding: .45rem .7rem; }
  table.calls { min-width: 56rem; } td.served code { word-break: break-all; }`,
    `    table.stack tr { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); }
    table.stack td:first-child, table.stack td[colspan], table.stack td.served { grid-column: 1 / -1; }
    table.stack td { overflow-wrap: anywhere; }`,
    `<p><a class="back" href="/ops#connections">← all connections</a></p>
<section id="connection" aria-labelledby="connection-title" data-connection="${e(c.id)}"><h2 id="connection-title">${e(c.tenant_name)} <span class="muted">${e(c.tenant_id)}</span></h2>
<dl class="facts"><dt>Connection</dt><dd><code>${e(c.id)}</code></dd><dt>Environment</dt><dd>${e(c.environment)}</dd>
<dt>Status</dt><dd>${e(c.status)}${c.health ? ` · ${e(c.health)}` : ''}</dd></dl></section>
${summarySection(summary)}
${callsSection(rows)}`,
  );
}
