import { createHash } from 'node:crypto';

/**
 * The ops pages' one script: every `<time datetime>` (UTC text without script) in the viewer's time zone, the UTC text
 * kept as its tooltip; `#tz` names the zone. Writes text, never HTML.
 */
export const LOCAL_TIMES_SCRIPT =
  "document.querySelectorAll('time[datetime]').forEach(function(t){var d=new Date(t.getAttribute('datetime'));" +
  'if(isNaN(d.getTime()))return;t.title=t.textContent;t.textContent=d.toLocaleString();});' +
  "var z=document.getElementById('tz');if(z)z.textContent=Intl.DateTimeFormat().resolvedOptions().timeZone||'local time';";

/** The CSP source that allows exactly that script (src/common/security-headers.ts). */
export const LOCAL_TIMES_SCRIPT_HASH = `'sha256-${createHash('sha256').update(LOCAL_TIMES_SCRIPT, 'utf8').digest('base64')}'`;
