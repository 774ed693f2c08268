import { Injectable } from '@nestjs/common';
import type { VaultKey } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { VaultCipher } from './vault-cipher';

/** The key columns an AAD format names, in order: `'{dispatch_id}/{position}/link'` → `['dispatch_id', 'position']`. */
type KeyOf<F extends string> = F extends `${string}{${infer K}}${infer Rest}` ? [K, ...KeyOf<Rest>] : [];
type Values<T extends readonly string[]> = { [I in keyof T]: string | number };
/** A field's row key (one value per column its format names), then the plaintext or ciphertext. */
type KeyThen<F extends string> = [...Values<KeyOf<F>>, string];
type RowKey = readonly (string | number)[];

/**
 * A kind of secret the vault keeps: its column, and the format of its additional authenticated data, which names the
 * row's key columns so that a value copied onto another row or column does not decrypt. `vault:rotate` walks these.
 */
export interface VaultField<F extends string = string> {
  readonly table: string;
  readonly column: string;
  readonly aad: F;
  readonly key: readonly string[];
}

const field = <F extends string>(table: string, column: string, aad: F): VaultField<F> =>
  Object.freeze({ table, column, aad, key: [...aad.matchAll(/\{(\w+)\}/g)].map((m) => m[1]) });

export const GRANT_ACCESS = field('grants', 'access_token_enc', '{connection_id}/access');
export const GRANT_REFRESH = field('grants', 'refresh_token_enc', '{connection_id}/refresh');
export const REWARD_LINK = field('dispatch_rewards', 'link_enc', '{dispatch_id}/{position}/link');
export const OAUTH_VERIFIER = field('oauth_states', 'code_verifier_enc', 'state/{state_hash}');
export const WEBHOOK_SECRET = field('webhook_endpoints', 'secret_enc', 'webhook_endpoint/{id}/secret');
export const WEBHOOK_KEY = field('webhook_keys', 'private_key_enc', '{connection_id}/webhook_key');
/** The vault canary's known value (vault-canary.ts), re-encrypted on its own after everything else. */
export const VAULT_CANARY = field('vault_canary', 'ciphertext', 'vault_canary');

/** Every column of vault ciphertexts that `vault:rotate` re-encrypts, in order; the canary follows them on its own. */
export const ENCRYPTED_COLUMNS: readonly VaultField[] = [
  GRANT_ACCESS,
  GRANT_REFRESH,
  REWARD_LINK,
  OAUTH_VERIFIER,
  WEBHOOK_SECRET,
  WEBHOOK_KEY,
];

/**
 * `seal(field, ...rowKey, plaintext)` encrypts with the first key of VAULT_KEYS, bound to the field's additional data;
 * `open(field, ...rowKey, ciphertext)` decrypts with whichever key wrote it (else VaultDecryptionError).
 */
@Injectable()
export class Vault {
  private readonly cipher: VaultCipher;
  /** The configured key ids, the encrypting one first (never key material). */
  readonly keyIds: readonly string[];

  constructor(@InjectConfig('vaultKeys') keys: readonly VaultKey[]) {
    this.cipher = new VaultCipher(keys);
    this.keyIds = keys.map((k) => k.id);
  }

  get currentKeyId(): string {
    return this.cipher.currentKeyId;
  }

  seal<F extends string>(f: VaultField<F>, ...args: KeyThen<F>): string {
    return this.cipher.encrypt(args.at(-1) as string, aadOf(f, args));
  }

  open<F extends string>(f: VaultField<F>, ...args: KeyThen<F>): string {
    return this.cipher.decrypt(args.at(-1) as string, aadOf(f, args));
  }

  /** A stored value of `f` (on the row `key`) encrypted again, with the first key (rotation). */
  reencrypt(f: VaultField, key: RowKey, ciphertext: string): string {
    const aad = aadOf(f, [...key, ciphertext]);
    return this.cipher.encrypt(this.cipher.decrypt(ciphertext, aad), aad);
  }
}

/** The field's additional data for the row key that precedes the value in `args`. */
function aadOf(f: VaultField, args: readonly unknown[]): string {
  if (args.length !== f.key.length + 1) throw new Error(`${f.table}.${f.column} takes ${f.key.join(', ')}`);
  let i = 0;
  return f.aad.replace(/\{\w+\}/g, () => String(args[i++]));
}
