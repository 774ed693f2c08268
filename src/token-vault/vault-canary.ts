import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type { Pool } from 'pg';
import { withTimeout } from '../common/schedule';
import { Database } from '../database/database';
import { inTransaction, type Sql } from '../database/sql';
import { GrantStore } from './grant.store';
import { VaultCipher, VaultDecryptionError } from './vault-cipher';
import { VAULT_CANARY, Vault } from './vault.service';

/** The known value. Knowing it does not help an attacker: AES-GCM resists known plaintext. */
export const CANARY_PLAINTEXT = 'rewards-gateway vault canary v1';

/**
 * What the configured keys make of the canary. `rotation_pending` (it decrypts with a later key) is a warning, not a
 * refusal: a rotation runs every instance with the new key first, *then* `vault:rotate`. `undecryptable`: its key id
 * is not configured, or the configured key with that id is other key material.
 */
export type CanaryState =
  | { state: 'current'; keyId: string }
  | { state: 'rotation_pending'; keyId: string; firstKeyId: string }
  | { state: 'missing' }
  | { state: 'undecryptable'; keyId: string; message: string };

/** The configured key ids (never key material): `"k2", "k1"`. */
const describeKeyIds = (vault: Vault): string => vault.keyIds.map((id) => `"${id}"`).join(', ');

/** The configured VAULT_KEYS cannot read this database's vault: the process must not start. */
export class VaultKeyMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VaultKeyMismatchError';
  }
}

/** Reads the canary (`lock`: under its row lock) and judges it against the configured keys; writes nothing. */
async function readCanary(q: Sql, vault: Vault, lock = false): Promise<CanaryState> {
  const { rows } = await q.query<{ ciphertext: string }>(
    `SELECT ciphertext FROM vault_canary WHERE id = 1 ${lock ? 'FOR UPDATE' : ''}`,
  );
  if (!rows[0]) return { state: 'missing' };
  const ciphertext = rows[0].ciphertext;
  const keyId = VaultCipher.keyIdOf(ciphertext) ?? '?';
  const configured = describeKeyIds(vault);
  let plaintext: string | undefined;
  try {
    plaintext = vault.open(VAULT_CANARY, ciphertext);
  } catch (error) {
    if (!(error instanceof VaultDecryptionError)) throw error;
  }
  if (plaintext === CANARY_PLAINTEXT) {
    return keyId === vault.currentKeyId
      ? { state: 'current', keyId }
      : { state: 'rotation_pending', keyId, firstKeyId: vault.currentKeyId };
  }
  const known = vault.keyIds.includes(keyId);
  const message = known
    ? `VAULT_KEYS cannot decrypt the vault canary: it was encrypted with key id "${keyId}", and the configured key "${keyId}" ` +
      `is different key material (configured key ids: ${configured}). Configure the key "${keyId}" that wrote this database's data.`
    : `VAULT_KEYS cannot decrypt the vault canary: it was encrypted with key id "${keyId}", which is not configured ` +
      `(configured key ids: ${configured}). Add the key "${keyId}" that wrote this database's data to VAULT_KEYS ` +
      '(the first key encrypts, every key decrypts); drop a key only after `npm run cli -- vault:rotate`.';
  return { state: 'undecryptable', keyId, message };
}

/** Writes the canary with the first key unless another instance did; true when this one did. */
async function insertCanary(q: Sql, vault: Vault): Promise<boolean> {
  const { rowCount } = await q.query(
    `INSERT INTO vault_canary (id, key_id, ciphertext) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING`,
    [vault.currentKeyId, vault.seal(VAULT_CANARY, CANARY_PLAINTEXT)],
  );
  return rowCount === 1;
}

/** `vault:rotate`, after everything else: the canary re-encrypted with the first key under its row lock. */
export async function reencryptVaultCanary(
  pool: Pool,
  vault: Vault,
): Promise<'rewritten' | 'current' | 'written'> {
  return inTransaction(pool, async (tx) => {
    const state = await readCanary(tx, vault, true);
    if (state.state === 'missing') return (await insertCanary(tx, vault)) ? 'written' : 'current';
    if (state.state === 'undecryptable') throw new VaultKeyMismatchError(state.message);
    if (state.state === 'current') return 'current';
    await tx.query(`UPDATE vault_canary SET key_id = $1, ciphertext = $2, rotated_at = now() WHERE id = 1`, [
      vault.currentKeyId,
      vault.seal(VAULT_CANARY, CANARY_PLAINTEXT),
    ]);
    return 'rewritten';
  });
}

/** Checked (written on a fresh database) before the app listens, so the wrong keys stop the start; read by readiness. */
@Injectable()
export class VaultCanary implements OnModuleInit {
  private readonly logger = new Logger('VaultCanary');

  constructor(
    private readonly vault: Vault,
    private readonly db: Database,
    private readonly grants: GrantStore,
  ) {}

  /**
   * Writes the canary with the first key when there is none (on a database that already holds grants, only once one
   * of them decrypts, lest the wrong keys be blessed), then checks it: VaultKeyMismatchError when the keys cannot
   * decrypt it. Instances starting together: one insert wins, every instance checks the row that won.
   */
  async onModuleInit(): Promise<void> {
    let state = await readCanary(this.db.main, this.vault);
    let written = false;
    if (state.state === 'missing') {
      await this.checkExistingGrant();
      written = await insertCanary(this.db.main, this.vault);
      state = await readCanary(this.db.main, this.vault);
    }
    if (state.state === 'undecryptable') throw new VaultKeyMismatchError(state.message);
    if (state.state === 'missing') throw new VaultKeyMismatchError('the vault canary could not be written');
    if (written) this.logger.log({ keyId: state.keyId }, `vault canary written with key "${state.keyId}"`);
    if (state.state === 'rotation_pending') {
      this.logger.warn(
        { keyId: state.keyId, firstKeyId: state.firstKeyId },
        `vault rotation pending: the data is under key "${state.keyId}", VAULT_KEYS starts with "${state.firstKeyId}"; ` +
          'once every instance runs with these keys, run `npm run cli -- vault:rotate`, then drop the old key',
      );
    }
  }

  async check(timeoutMs = 1_500): Promise<CanaryState> {
    return withTimeout(
      readCanary(this.db.main, this.vault),
      timeoutMs,
      `the vault canary was not read within ${timeoutMs} ms`,
    );
  }

  private async checkExistingGrant(): Promise<void> {
    const grant = await this.grants.newest(this.db.main);
    if (!grant) return;
    try {
      this.grants.accessToken(grant);
    } catch (error) {
      if (!(error instanceof VaultDecryptionError)) throw error;
      throw new VaultKeyMismatchError(
        `VAULT_KEYS cannot decrypt the existing grants (the newest is encrypted with key id "${VaultCipher.keyIdOf(grant.access_token_enc)}"; ` +
          `configured key ids: ${describeKeyIds(this.vault)}), so no vault canary is written. Configure the key that wrote this database's data.`,
      );
    }
  }
}
