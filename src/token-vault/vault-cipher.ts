import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { VaultKey } from '../config/app-config';

/** A vault value that cannot be decrypted: unknown key id, tampered bytes, or copied from another row. */
export class VaultDecryptionError extends Error {
  constructor(reason: string) {
    super(`vault value cannot be decrypted: ${reason}`);
    this.name = 'VaultDecryptionError';
  }
}

const FORMAT = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * AES-256-GCM, a fresh 12-byte IV per value, the 16-byte tag enforced; stored as `v1:<keyId>:<iv>:<tag>:<ciphertext>`
 * (base64url), bound to its context as additional data. The first key encrypts; every key decrypts (rotation).
 */
export class VaultCipher {
  private readonly keys: Map<string, Buffer>;
  private readonly current: VaultKey;

  constructor(keys: readonly VaultKey[]) {
    if (keys.length === 0) throw new Error('the vault needs at least one key (VAULT_KEYS)');
    for (const k of keys) if (k.key.length !== 32) throw new Error(`vault key ${k.id} must be 32 bytes`);
    this.keys = new Map(keys.map((k) => [k.id, k.key]));
    this.current = keys[0];
  }

  get currentKeyId(): string {
    return this.current.id;
  }

  encrypt(plaintext: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.current.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), ciphertext].map((b) => b.toString('base64url'));
    return [FORMAT, this.current.id, ...parts].join(':');
  }

  decrypt(value: string, context: string): string {
    const parts = value.split(':');
    if (parts.length !== 5 || parts[0] !== FORMAT) throw new VaultDecryptionError('unknown format');
    const [, keyId, ivText, tagText, ctText] = parts;
    const key = this.keys.get(keyId);
    if (!key) throw new VaultDecryptionError(`unknown key id "${keyId}" (is it still in VAULT_KEYS?)`);
    const iv = Buffer.from(ivText, 'base64url');
    const tag = Buffer.from(tagText, 'base64url');
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES)
      throw new VaultDecryptionError('bad IV or tag length');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(Buffer.from(ctText, 'base64url')), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      throw new VaultDecryptionError('authentication failed (tampered, or bound to another connection)');
    }
  }

  /** The key id a stored value was encrypted with. */
  static keyIdOf(value: string): string | undefined {
    return value.split(':')[1];
  }
}
