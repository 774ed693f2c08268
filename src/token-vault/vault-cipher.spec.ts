import { randomBytes } from 'node:crypto';
import { VaultCipher, VaultDecryptionError } from './vault-cipher';
import {
  ENCRYPTED_COLUMNS,
  GRANT_ACCESS,
  GRANT_REFRESH,
  OAUTH_VERIFIER,
  REWARD_LINK,
  Vault,
  VAULT_CANARY,
  type VaultField,
  WEBHOOK_KEY,
  WEBHOOK_SECRET,
} from './vault.service';

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

describe('Vault: the fields and their additional data', () => {
  const k1 = key('k1');

  it('opens what was stored under each additional data used before the fields existed (existing databases)', () => {
    const stored = new VaultCipher([k1]);
    const vault = new Vault([k1]);
    const before: [VaultField, (string | number)[], string][] = [
      [GRANT_ACCESS, ['c1'], 'c1/access'],
      [GRANT_REFRESH, ['c1'], 'c1/refresh'],
      [REWARD_LINK, ['d1', 3], 'd1/3/link'],
      [OAUTH_VERIFIER, ['h1'], 'state/h1'],
      [WEBHOOK_SECRET, ['e1'], 'webhook_endpoint/e1/secret'],
      [WEBHOOK_KEY, ['c1'], 'c1/webhook_key'],
      [VAULT_CANARY, [], 'vault_canary'],
    ];
    expect(before.map(([f]) => f)).toEqual([...ENCRYPTED_COLUMNS, VAULT_CANARY]);
    for (const [field, rowKey, aad] of before) {
      const value = stored.encrypt('secret', aad);
      expect(VaultCipher.keyIdOf(vault.reencrypt(field, rowKey, value))).toBe('k1');
    }
    expect(vault.open(REWARD_LINK, 'd1', 3, stored.encrypt('link', 'd1/3/link'))).toBe('link');
  });

  it('binds a value to its row and field: copied onto another row or column, it does not open', () => {
    const vault = new Vault([k1]);
    const access = vault.seal(GRANT_ACCESS, 'c1', 'token');
    expect(vault.open(GRANT_ACCESS, 'c1', access)).toBe('token');
    expect(() => vault.open(GRANT_ACCESS, 'c2', access)).toThrow(VaultDecryptionError);
    expect(() => vault.open(GRANT_REFRESH, 'c1', access)).toThrow(VaultDecryptionError);
    const link = vault.seal(REWARD_LINK, 'd1', 0, 'https://link');
    expect(() => vault.open(REWARD_LINK, 'd1', 1, link)).toThrow(VaultDecryptionError);
  });

  it('re-encrypts a value under the first key, for the same row', () => {
    const old = new Vault([k1]).seal(REWARD_LINK, 'd1', 0, 'https://link');
    const rotated = new Vault([key('k2'), k1]);
    const again = rotated.reencrypt(REWARD_LINK, ['d1', 0], old);
    expect(VaultCipher.keyIdOf(again)).toBe('k2');
    expect(rotated.open(REWARD_LINK, 'd1', 0, again)).toBe('https://link');
    expect(() => rotated.reencrypt(REWARD_LINK, ['d1'], old)).toThrow(/takes dispatch_id, position/);
  });
});
