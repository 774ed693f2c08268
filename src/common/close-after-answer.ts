import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** After an answer that refused a body, at most this much more of it is read and thrown away… */
export const DRAIN_MAX_BYTES = 16 * 1024 * 1024;
/** …for at most this long; then the connection is closed whatever is left. */
export const DRAIN_MAX_MS = 5_000;

const draining = new WeakSet<Socket>();

/**
 * For an answer given without reading the request's body (or all of it): a refused key, type or size. The answer
 * goes out with `Connection: close`, and the connection is then closed the way mature servers do it (nginx's
 * "lingering close"): our side is shut for writing once the answer is out, and what the client still sends is read
 * and discarded — until its body ends or it closes, at most DRAIN_MAX_BYTES or DRAIN_MAX_MS — before the socket is
 * closed. Closing a socket with unread bytes in it makes the kernel answer with a reset, which can reach a client
 * still sending its body before it has read the answer: it would see "connection reset" instead of the 413.
 * Reading on costs a bounded amount; the body is never parsed or kept.
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  const socket = req.socket as Socket & { destroySoon?: () => void };
  if (!socket || draining.has(socket)) return;
  draining.add(socket);
  // Node's HTTP server ends a `Connection: close` exchange with socket.destroySoon() once the answer is written:
  // that socket, and only that one, drains first.
  socket.destroySoon = () => drainThenClose(req, socket);
}

function drainThenClose(req: IncomingMessage, socket: Socket): void {
  if (socket.writable) socket.end(); // the answer is complete: the client sees the end of it
  let received = 0;
  let closed = false;
  // Nothing left to read: close once the answer has gone out (as Node would have). Out of bounds: close now.
  const close = (now: boolean) => {
    if (closed) return;
    closed = true;
    clearTimeout(timer);
    req.off('data', onData);
    if (now || socket.writableFinished) socket.destroy();
    else socket.once('finish', () => socket.destroy());
  };
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > DRAIN_MAX_BYTES) close(true);
  };
  const timer = setTimeout(() => close(true), DRAIN_MAX_MS);
  timer.unref();
  if (req.complete) return close(false);
  req.on('data', onData);
  req.once('end', () => close(false)); // the whole body has arrived: nothing is left unread
  req.once('error', () => close(true));
  socket.once('end', () => close(false)); // the client closed its side
  socket.once('close', () => close(true));
  req.resume();
}
