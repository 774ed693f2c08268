import type { IncomingMessage, ServerResponse } from 'node:http';
import typeis from 'type-is';
import { CommonError, type ErrorDetail, ValidationFailedError } from './app-error';
import { closeAfterAnswer } from './close-after-answer';

/**
 * The JSON body reader of the gateway's API (`/v1`, app.factory.ts), with every limit applied while or right after
 * reading — before class-transformer and class-validator see anything, in one pass over the bytes and one over the
 * parsed value (a refused size is answered without reading what will be refused: closeAfterAnswer):
 * - `Content-Encoding` other than identity → 415 (nothing is decompressed, so nothing can expand);
 * - more than `MAX_BODY_BYTES` (8 MiB on the send route, for batches) → 413, reading stops there;
 * - bytes that are not valid UTF-8 → 400 (not silently replaced);
 * - nesting deeper than `MAX_DEPTH`, an array longer than `MAX_ARRAY_LENGTH`, a string or key longer than
 *   `MAX_STRING_LENGTH` (arrays: 10,000 on the send route), a NUL character, an unpaired surrogate, or a `__proto__` / `constructor` / `prototype` key
 *   → 400 naming the path.
 * The walk is iterative (no recursion, so no stack to overflow) and visits each value once.
 */
const MAX_BODY_BYTES = 1024 * 1024;
const MAX_DEPTH = 32;
const MAX_ARRAY_LENGTH = 1_000;
const MAX_STRING_LENGTH = 10_000;
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** The size limits one route reads its body with. */
interface BodyLimits {
  maxBytes: number;
  maxArrayLength: number;
}
const DEFAULT_LIMITS: BodyLimits = { maxBytes: MAX_BODY_BYTES, maxArrayLength: MAX_ARRAY_LENGTH };
/** `POST /v1/tenants/{tenant}/rewards` takes batches of up to 10,000 rewards. */
const SEND_LIMITS: BodyLimits = { maxBytes: 8 * 1024 * 1024, maxArrayLength: 10_000 };
/** The send route as the router matches it: any letter case, an optional trailing slash, any query string. */
const SEND_ROUTE = /^\/v1\/tenants\/[^/?]+\/rewards\/?(\?|$)/i;
const decoder = new TextDecoder('utf-8', { fatal: true });

export const NO_BODY = Symbol('no body');

/** The checked JSON value of the request's body, or NO_BODY when it has none; rejects with our 413 / 415 / 400s. */
export async function readJsonBody(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const limits = req.method === 'POST' && SEND_ROUTE.test(req.url ?? '') ? SEND_LIMITS : DEFAULT_LIMITS;
  const length = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if ((length === undefined || length === '0') && !chunked) return NO_BODY;
  const type = req.headers['content-type'];
  // The usual header exactly (no parameters to parse), else type-is decides.
  if (type !== 'application/json' && !typeis(req, ['application/json'])) {
    throw notJsonError(type);
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(type ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new CommonError(415, 'unsupported_media_type', 'JSON bodies are read as UTF-8 only.', [
      { field: 'Content-Type', reason: `charset ${charset} is not accepted` },
    ]);
  }
  refuseCompressed(req, 'Compressed request bodies are not accepted; send plain JSON.');
  const bytes = await readCapped(req, res, limits.maxBytes, () => tooLargeError(limits.maxBytes));
  return parse(bytes, limits);
}

/** The JSON reader's refusals, as it answers them (and api-docs.ts documents them). */
export const notJsonError = (type: string | undefined) =>
  new CommonError(
    415,
    'unsupported_media_type',
    'Send the request body as JSON with "Content-Type: application/json".',
    [{ field: 'Content-Type', reason: `${type ?? 'missing'} is not application/json` }],
  );
export const tooLargeError = (maxBytes: number) =>
  new CommonError(413, 'payload_too_large', `The request body is larger than ${maxBytes / 1024 / 1024} MiB.`);
export const invalidJsonError = () =>
  new CommonError(400, 'invalid_json', 'The request body is not valid JSON.', [
    { field: 'body', reason: 'not valid JSON' },
  ]);

/** A compressed body is refused (415; with `res`, the connection closed after it): nothing is decompressed. */
export function refuseCompressed(req: IncomingMessage, message: string, res?: ServerResponse): void {
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding !== 'identity') {
    if (res) closeAfterAnswer(req, res);
    throw new CommonError(415, 'unsupported_media_type', message, [
      { field: 'Content-Encoding', reason: `${encoding} is not accepted` },
    ]);
  }
}

/**
 * Reads a request's body into one buffer within `maxBytes`: a declared length over it is refused before a byte is read,
 * else reading stops — the request paused — as soon as it passes it; either way with `tooLarge()` and the connection
 * closed after the answer (closeAfterAnswer). A read error is a 400.
 */
export function readCapped(
  req: IncomingMessage,
  res: ServerResponse,
  maxBytes: number,
  tooLarge: () => Error,
): Promise<Buffer> {
  const refuse = () => {
    closeAfterAnswer(req, res); // do not read what will be refused
    return tooLarge();
  };
  const length = req.headers['content-length'];
  if (length !== undefined && Number(length) > maxBytes) return Promise.reject(refuse());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error?: Error) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      if (error) reject(error);
      else resolve(Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) return void chunks.push(chunk);
      req.pause();
      finish(refuse());
    };
    const onEnd = () => finish();
    const onError = () => finish(new CommonError(400, 'bad_request', 'The request body could not be read.'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** A body's bytes as text, or our 400 with `code` and `message` when they are not UTF-8. */
export function utf8Text(bytes: Buffer, code: 'bad_request' | 'invalid_json', message: string): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new CommonError(400, code, message, [{ field: 'body', reason: 'invalid UTF-8 byte sequence' }]);
  }
}

/** Bytes → a checked JSON value (throws our 400s). */
function parse(bytes: Buffer, limits: BodyLimits): unknown {
  const text = utf8Text(bytes, 'invalid_json', 'The request body is not valid UTF-8.');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidJsonError();
  }
  // Nest's ValidationPipe reads a null body as {}: a body whose fields are all optional would pass as an empty one.
  if (value === null)
    throw new ValidationFailedError([{ field: 'body', reason: 'must be a JSON object, not null' }]);
  const problem = inspect(value, limits.maxArrayLength);
  if (problem)
    throw new ValidationFailedError([problem], 'The request body is outside the limits; see details.');
  return value;
}

/** A value met by the walk, and where: its path is spelled out only for the value reported. */
interface Visit {
  value: unknown;
  parent: Visit | null;
  key: string | number;
  depth: number;
}

/** `body`, `rewards[0].recipient.email`: the path of a visited value, as error details name fields. */
function pathOf(visit: Visit): string {
  const keys: (string | number)[] = [];
  for (let v: Visit | null = visit; v?.parent; v = v.parent) keys.push(v.key);
  let path = '';
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i];
    path = typeof key === 'number' ? `${path || 'body'}[${key}]` : path ? `${path}.${key}` : key;
  }
  return path || 'body';
}

/** One iterative walk: the first value that breaks a limit, with its path; null when all is well. */
function inspect(root: unknown, maxArrayLength: number): ErrorDetail | null {
  const stack: Visit[] = [{ value: root, parent: null, key: '', depth: 0 }];
  while (stack.length) {
    const visit = stack.pop() as Visit;
    const { value, depth } = visit;
    if (typeof value === 'string') {
      const bad = badString(value);
      if (bad) return { field: pathOf(visit), reason: bad };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_DEPTH) return { field: pathOf(visit), reason: `nested deeper than ${MAX_DEPTH} levels` };
    if (Array.isArray(value)) {
      if (value.length > maxArrayLength)
        return { field: pathOf(visit), reason: `at most ${maxArrayLength} items (got ${value.length})` };
      for (let i = value.length - 1; i >= 0; i--)
        stack.push({ value: value[i], parent: visit, key: i, depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(value);
    if (keys.length > MAX_ARRAY_LENGTH)
      return { field: pathOf(visit), reason: `at most ${MAX_ARRAY_LENGTH} properties` };
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i];
      const child: Visit = {
        value: (value as Record<string, unknown>)[key],
        parent: visit,
        key,
        depth: depth + 1,
      };
      if (FORBIDDEN_KEYS.has(key))
        return { field: pathOf(child), reason: `"${key}" is not an accepted property name` };
      const bad = badString(key);
      if (bad) return { field: pathOf(child), reason: `property name ${bad}` };
      stack.push(child);
    }
  }
  return null;
}

function badString(s: string): string | null {
  if (s.length > MAX_STRING_LENGTH) return `longer than ${MAX_STRING_LENGTH} characters`;
  if (s.includes('\u0000')) return 'contains a NUL (\\u0000) character';
  if (!(s as unknown as { isWellFormed(): boolean }).isWellFormed())
    return 'contains an unpaired surrogate (not valid Unicode)';
  return null;
}
