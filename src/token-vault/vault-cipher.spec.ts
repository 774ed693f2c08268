import { randomBytes } from 'node:crypto';
import { VaultCipher, VaultDecryptionError } from './vault-cipher';

const key = (id: string) => ({ id, key: randomBytes(32) });

describe('VaultCipher', () => {
  const k1 = key('k1');
  const k2 = key('k2');

  it('round-trips with a fresh IV each time', () => {
    const vault = new VaultCipher([k1]);
    const a = vault.encrypt('secret-token', 'conn-1/access');
    const b = vault.encrypt('secret-token', 'conn-1/access');
    expect(a).not.toEqual(b);
    expect(a).not.toContain('secret-token');
    expect(vault.decrypt(a, 'conn-1/access')).toBe('secret-token');
  });

  it('fails closed when the value is bound to another connection or field', () => {
    const vault = new VaultCipher([k1]);
    const value = vault.encrypt('secret-token', 'conn-1/access');
    expect(() => vault.decrypt(value, 'conn-2/access')).toThrow(VaultDecryptionError);
    expect(() => vault.decrypt(value, 'conn-1/refresh')).toThrow(VaultDecryptionError);
  });

  it('fails closed on a tampered ciphertext, tag or a truncated tag', () => {
    const vault = new VaultCipher([k1]);
    const [v, id, iv, tag, ct] = vault.encrypt('secret-token', 'c').split(':');
    const flipped = Buffer.from(ct, 'base64url');
    flipped[0] ^= 1;
    expect(() => vault.decrypt([v, id, iv, tag, flipped.toString('base64url')].join(':'), 'c')).toThrow(
      /authentication failed/,
    );
    const shortTag = Buffer.from(tag, 'base64url').subarray(0, 8).toString('base64url');
    expect(() => vault.decrypt([v, id, iv, shortTag, ct].join(':'), 'c')).toThrow(/tag length/);
  });

  it('encrypts with the first key and decrypts with any; an unknown key id fails with a clear error', () => {
    const old = new VaultCipher([k1]).encrypt('t', 'c');
    const rotated = new VaultCipher([k2, k1]);
    expect(rotated.decrypt(old, 'c')).toBe('t');
    expect(VaultCipher.keyIdOf(rotated.encrypt('t', 'c'))).toBe('k2');
    expect(() => new VaultCipher([k2]).decrypt(old, 'c')).toThrow(/unknown key id "k1"/);
  });

  it('refuses to exist without a 32-byte key', () => {
    expect(() => new VaultCipher([])).toThrow();
    expect(() => new VaultCipher([{ id: 'x', key: randomBytes(16) }])).toThrow();
  });
});
