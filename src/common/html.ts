import type { FastifyReply } from 'fastify';

/** Answers a server-rendered page. */
export function sendHtml(reply: FastifyReply, page: string, status = 200): void {
  void reply.code(status).type('text/html; charset=utf-8').send(page);
}

/** Escapes text for HTML content and attribute values (the server-rendered pages). */
export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );
}
