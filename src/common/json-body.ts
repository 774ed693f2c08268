import type { NextFunction, Request, Response } from 'express';
import { CommonError, type ErrorDetail, ValidationFailedError } from './app-error';

/**
 * The JSON body reader of the gateway's API, with every limit applied while or right after reading — before
 * class-transformer and class-validator see anything, in one pass over the bytes and one over the parsed value:
 * - `Content-Encoding` other than identity → 415 (nothing is decompressed, so nothing can expand);
 * - more than `MAX_BODY_BYTES` → 413, reading stops there;
 * - bytes that are not valid UTF-8 → 400 (not silently replaced);
 * - nesting deeper than `MAX_DEPTH`, an array longer than `MAX_ARRAY_LENGTH`, a string or key longer than
 *   `MAX_STRING_LENGTH`, a NUL character, an unpaired surrogate, or a `__proto__` / `constructor` / `prototype` key
 *   → 400 naming the path.
 * The walk is iterative (no recursion, so no stack to overflow) and visits each value once.
 */
export const MAX_BODY_BYTES = 1024 * 1024;
export const MAX_DEPTH = 32;
export const MAX_ARRAY_LENGTH = 1_000;
export const MAX_STRING_LENGTH = 10_000;
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
const decoder = new TextDecoder('utf-8', { fatal: true });

export function jsonBody(req: Request, res: Response, next: NextFunction): void {
  const length = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if ((length === undefined || length === '0') && !chunked) return next();
  if (!req.is('application/json')) {
    return next(
      new CommonError(
        415,
        'unsupported_media_type',
        'Send the request body as JSON with "Content-Type: application/json".',
        [
          {
            field: 'Content-Type',
            reason: `${req.headers['content-type'] ?? 'missing'} is not application/json`,
          },
        ],
      ),
    );
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i
    .exec(req.headers['content-type'] ?? '')?.[1]
    ?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return next(
      new CommonError(415, 'unsupported_media_type', 'JSON bodies are read as UTF-8 only.', [
        { field: 'Content-Type', reason: `charset ${charset} is not accepted` },
      ]),
    );
  }
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding !== 'identity') {
    return next(
      new CommonError(
        415,
        'unsupported_media_type',
        'Compressed request bodies are not accepted; send plain JSON.',
        [{ field: 'Content-Encoding', reason: `${encoding} is not accepted` }],
      ),
    );
  }
  if (length !== undefined && Number(length) > MAX_BODY_BYTES) {
    res.setHeader('Connection', 'close'); // do not read what will be refused
    return next(
      new CommonError(
        413,
        'payload_too_large',
        `The request body is larger than ${MAX_BODY_BYTES / 1024 / 1024} MiB.`,
      ),
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let done = false;
  const finish = (error?: Error) => {
    if (done) return;
    done = true;
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onError);
    if (error) return next(error);
    try {
      req.body = parse(Buffer.concat(chunks, size));
      next();
    } catch (e) {
      next(e);
    }
  };
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      res.setHeader('Connection', 'close');
      req.pause();
      finish(
        new CommonError(
          413,
          'payload_too_large',
          `The request body is larger than ${MAX_BODY_BYTES / 1024 / 1024} MiB.`,
        ),
      );
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = () => finish();
  const onError = () => finish(new CommonError(400, 'bad_request', 'The request body could not be read.'));
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
}

/** Bytes → a checked JSON value (throws our 400s). Exported for the property tests. */
export function parse(bytes: Buffer): unknown {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw new CommonError(400, 'invalid_json', 'The request body is not valid UTF-8.', [
      { field: 'body', reason: 'invalid UTF-8 byte sequence' },
    ]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CommonError(400, 'invalid_json', 'The request body is not valid JSON.', [
      { field: 'body', reason: 'not valid JSON' },
    ]);
  }
  const problem = inspect(value);
  if (problem)
    throw new ValidationFailedError([problem], 'The request body is outside the limits; see details.');
  return value;
}

/** One iterative walk: the first value that breaks a limit, with its path; null when all is well. */
export function inspect(root: unknown): ErrorDetail | null {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: root, path: 'body', depth: 0 }];
  while (stack.length) {
    const { value, path, depth } = stack.pop() as { value: unknown; path: string; depth: number };
    if (typeof value === 'string') {
      const bad = badString(value);
      if (bad) return { field: path, reason: bad };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_DEPTH) return { field: path, reason: `nested deeper than ${MAX_DEPTH} levels` };
    if (Array.isArray(value)) {
      if (value.length > MAX_ARRAY_LENGTH)
        return { field: path, reason: `at most ${MAX_ARRAY_LENGTH} items (got ${value.length})` };
      for (let i = value.length - 1; i >= 0; i--)
        stack.push({ value: value[i], path: `${path}[${i}]`, depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(value);
    if (keys.length > MAX_ARRAY_LENGTH)
      return { field: path, reason: `at most ${MAX_ARRAY_LENGTH} properties` };
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i];
      const at = path === 'body' ? key : `${path}.${key}`;
      if (FORBIDDEN_KEYS.has(key)) return { field: at, reason: `"${key}" is not an accepted property name` };
      const bad = badString(key);
      if (bad) return { field: at, reason: `property name ${bad}` };
      stack.push({ value: (value as Record<string, unknown>)[key], path: at, depth: depth + 1 });
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
