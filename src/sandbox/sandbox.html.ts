import { escapeHtml } from '../common/html';

export { escapeHtml };

/** A plain, readable page for the emulator's consent and error screens. `title` is escaped; `body` is trusted HTML. */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Rewards sandbox</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; background: #f4f5f7; color: #1f2328; margin: 0; }
  main { max-width: 32rem; margin: 4rem auto; background: #fff; padding: 2rem; border-radius: 12px; box-shadow: 0 1px 4px #0002; }
  h1 { font-size: 1.4rem; margin-top: 0; } .badge { font-size: .75rem; background: #fde68a; padding: .1rem .5rem; border-radius: 6px; }
  button { font: inherit; padding: .6rem 1.4rem; border-radius: 8px; border: 0; background: #2563eb; color: #fff; cursor: pointer; margin-right: .5rem; }
  button.secondary { background: #e5e7eb; color: #1f2328; } select { font: inherit; margin-left: .5rem; }
</style></head>
<body><main><span class="badge">Rewards service · sandbox</span><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;
}
