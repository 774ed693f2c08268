import type { IncomingMessage, ServerResponse } from 'node:http';
import typeis from 'type-is';
import { CommonError, nulCharacterError } from './app-error';
import { readCapped, refuseCompressed, utf8Text } from './json-body';

/** The dashboard's forms carry a CSRF token and nothing else: a few hundred bytes. */
const MAX_FORM_BYTES = 8 * 1024;

/**
 * The body reader of the dashboard's form posts (`application/x-www-form-urlencoded`), with the JSON reader's rules
 * (readCapped; UTF-8 only; no NUL character). A field sent twice becomes an array, as body-parser's
 * `urlencoded({ extended: false })` has it. Other content types are left alone (undefined: no body), as body-parser
 * leaves them.
 */
export async function readFormBody(
  req: IncomingMessage,
  res: ServerResponse,
): Promise<Record<string, string | string[]> | undefined> {
  if (!typeis(req, ['application/x-www-form-urlencoded'])) return undefined;
  refuseCompressed(req, 'Compressed request bodies are not accepted.', res);
  const tooLarge = `The form body is larger than ${MAX_FORM_BYTES / 1024} KiB.`;
  const bytes = await readCapped(
    req,
    res,
    MAX_FORM_BYTES,
    () => new CommonError(413, 'payload_too_large', tooLarge),
  );
  const text = utf8Text(bytes, 'bad_request', 'The form body is not valid UTF-8.');
  const body = Object.create(null) as Record<string, string | string[]>;
  for (const [name, value] of new URLSearchParams(text)) {
    // NUL characters cannot be stored in Postgres text: refused by name, as in JSON bodies.
    if (name.includes('\u0000') || value.includes('\u0000'))
      throw nulCharacterError(`body.${name.split('\u0000').join('\\u0000')}`);
    const seen = Object.hasOwn(body, name) ? body[name] : undefined;
    body[name] = seen === undefined ? value : ([] as string[]).concat(seen, value);
  }
  return body;
}
