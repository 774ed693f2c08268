import { createHash } from 'node:crypto';

/**
 * The dashboard's one script, inline at the end of the page: every `<time datetime="ISO">` (rendered as UTC text
 * ending in "UTC", correct without script) is rewritten with `toLocaleString()` — the viewer's time zone and locale —
 * keeping the UTC text as its tooltip; `#tz` then names the viewer's time zone. It reads only the page's own
 * attributes and writes text (never HTML).
 */
export const LOCAL_TIMES_SCRIPT =
  "document.querySelectorAll('time[datetime]').forEach(function(t){var d=new Date(t.getAttribute('datetime'));" +
  'if(isNaN(d.getTime()))return;t.title=t.textContent;t.textContent=d.toLocaleString();});' +
  "var z=document.getElementById('tz');if(z)z.textContent=Intl.DateTimeFormat().resolvedOptions().timeZone||'local time';";

/**
 * The CSP source that allows exactly that script (`script-src 'sha256-…'`), computed once at start-up: `/ops` gets
 * it (src/common/security-headers.ts), no other page runs script.
 */
export const LOCAL_TIMES_SCRIPT_HASH = `'sha256-${createHash('sha256').update(LOCAL_TIMES_SCRIPT, 'utf8').digest('base64')}'`;
