import { hash } from 'node:crypto';

/**
 * SHA-256 of a text, hex: API keys, request bodies, OAuth states are stored and compared as this. One call
 * (`crypto.hash`) rather than a Hash object per digest: the send path takes two per request.
 */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}
