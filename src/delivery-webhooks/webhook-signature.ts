import { timingSafeEqual } from 'node:crypto';
import type { WebhookKey } from './webhook-key.store';

/** The header the rewards service signs its webhook requests with (spec §3), as Node lower-cases it. */
export const SIGNATURE_HEADER = 'tremendous-webhook-signature';

const HEX_DIGEST = /^[0-9a-fA-F]{64}$/;

/**
 * The 32-byte HMAC-SHA256 digest a `Tremendous-Webhook-Signature` value carries — `<algorithm>=<hex>` (`sha256=…`);
 * the part before the first `=` is ignored, as the service's sample does. Null when missing or malformed (a
 * repeated header, which Node joins with a comma, is malformed too).
 */
export function parseSignature(header: string | string[] | undefined): Buffer | null {
  if (typeof header !== 'string' || header.length > 256) return null;
  const at = header.indexOf('=');
  const hex = (at >= 0 ? header.slice(at + 1) : header).trim();
  return HEX_DIGEST.test(hex) ? Buffer.from(hex, 'hex') : null;
}

/**
 * The byte strings a signature may have been computed over: the raw body exactly as received, and the JSON as
 * re-serialised compactly (`JSON.stringify(JSON.parse(raw))` — the service's sample hashes `JSON.parse(raw).to_json`;
 * both agree when the service sends compact JSON). The second is left out when it equals the first or cannot be built.
 */
export function signedForms(raw: Buffer, parsed: unknown): Buffer[] {
  let reserialised: Buffer | null = null;
  try {
    const text = JSON.stringify(parsed);
    if (typeof text === 'string') reserialised = Buffer.from(text, 'utf8');
  } catch {
    // Too deeply nested to serialise again: only the raw form can match.
  }
  return reserialised && !reserialised.equals(raw) ? [raw, reserialised] : [raw];
}

/** True when `provided` is the key's HMAC of one of `forms`; compared in constant time on equal-length buffers. */
export function signatureMatches(provided: Buffer, key: Pick<WebhookKey, 'hmac'>, forms: Buffer[]): boolean {
  let ok = false;
  for (const form of forms) {
    const expected = key.hmac(form);
    // Every form is checked (no early exit): the time does not tell which one matched.
    if (expected.length === provided.length && timingSafeEqual(expected, provided)) ok = true;
  }
  return ok;
}
