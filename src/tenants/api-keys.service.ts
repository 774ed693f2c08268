import { Injectable, Logger } from '@nestjs/common';
import { Database } from '../database/database';
import { NotificationsService } from '../database/notifications.service';
import type { Sql } from '../database/sql';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../common/digest';
import { InjectConfig } from '../config/config.module';
import { AuditLog } from '../audit/audit-log.service';
import { Clock } from '../common/clock';
import { TtlCache } from '../common/ttl-cache';
import { apiKeyAlreadyRotated, apiKeyNotFound } from './tenants.errors';
import type { ApiKeyResponse, CreatedApiKeyResponse, RotatedApiKeyResponse } from './dto/tenant.dto';
import { API_KEY_SCOPES, type ApiKeyScope, isApiKeyScope, type Principal } from './auth/principal';

/** How long this process trusts what it read of a key (a revocation elsewhere is also pushed: NOTIFY). */
const CACHE_TTL_MS = 10_000;
/** A key prefix that matches no key is remembered this long: repeated junk keys cost no database lookup. */
const UNKNOWN_PREFIX_TTL_MS = 60_000;
const CACHE_MAX_ENTRIES = 10_000;
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

/** The part of a key that identifies it without revealing it (`rgk_` + 4 characters), as stored in `api_keys.prefix`. */
export function keyPrefix(presented: string): string | null {
  return /^rg[ko]_[A-Za-z0-9_-]{4}/.test(presented) ? presented.slice(0, 8) : null;
}

/** An API key's columns as the API answers them (only its SHA-256 hash is stored), times in ISO 8601 UTC with ms. */
const KEY_COLUMNS = `id, name, prefix, scopes, ${['created_at', 'last_used_at', 'expires_at', 'revoked_at']
  .map((c) => `to_char(${c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS ${c}`)
  .join(', ')}, rotated_from`;

/** The longest grace period a rotation may give the old key, and the default. */
export const MAX_ROTATION_GRACE_S = 7 * 24 * 3600;
export const DEFAULT_ROTATION_GRACE_S = 24 * 3600;

/**
 * Creates a key with 256 bits of randomness (`rgk_` for a tenant, `rgo_` for an operator) and stores its hash.
 * The plaintext is returned here only. Also the CLI's `operator-key:create`.
 */
export async function createApiKey(
  db: Sql,
  tenantId: string | null,
  name: string,
  scopes: readonly ApiKeyScope[] = API_KEY_SCOPES,
  rotatedFrom: string | null = null,
): Promise<{ row: ApiKeyResponse; key: string }> {
  const key = `${tenantId ? 'rgk' : 'rgo'}_${randomBytes(32).toString('base64url')}`;
  const { rows } = await db.query<ApiKeyResponse>(
    `INSERT INTO api_keys (tenant_id, name, key_hash, prefix, scopes, rotated_from) VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING ${KEY_COLUMNS}`,
    [tenantId, name, sha256Hex(key), key.slice(0, 8), [...scopes], rotatedFrom],
  );
  return { row: rows[0], key };
}

interface CacheEntry {
  principal: Principal;
  /** The key's own end (a rotated key's grace), checked at every use: an expired key fails wherever it is cached. */
  keyExpiresAt: number | null;
}

/**
 * API keys (every statement that writes `api_keys`), stored as SHA-256 hashes. Authentications are cached for 10 s as
 * an accelerator only: a revocation or rotation publishes a NOTIFY in its transaction, and every instance drops the
 * key when it commits; an expiry needs none (each use compares `expires_at` with the clock).
 */
@Injectable()
export class ApiKeysService {
  private readonly logger = new Logger(ApiKeysService.name);
  private readonly cache: TtlCache<CacheEntry>;
  private readonly unknownPrefixes: TtlCache<true>;
  /** The keys whose last use this process recorded within the last minute. */
  private readonly lastUseWritten: TtlCache<true>;
  private readonly operatorKeyHash: Buffer;

  constructor(
    private readonly db: Database,
    @InjectConfig('operatorApiKey') operatorApiKey: string,
    private readonly notifications: NotificationsService,
    private readonly audit: AuditLog,
    private readonly clock: Clock,
  ) {
    this.operatorKeyHash = Buffer.from(sha256Hex(operatorApiKey), 'hex');
    this.cache = new TtlCache(clock, CACHE_MAX_ENTRIES);
    this.unknownPrefixes = new TtlCache(clock, CACHE_MAX_ENTRIES);
    this.lastUseWritten = new TtlCache(clock, CACHE_MAX_ENTRIES);
    notifications.evictFrom(this.cache, 'api_key', ({ hash }) => hash);
    notifications.evictFrom(this.unknownPrefixes, 'api_key_prefix', ({ prefix }) => prefix);
  }

  /** A tenant's key, or with `tenantId` null an operator's. Only its SHA-256 hash is stored. */
  async create(
    tenantId: string | null,
    name: string,
    scopes: readonly ApiKeyScope[] = API_KEY_SCOPES,
  ): Promise<CreatedApiKeyResponse> {
    const { row, key } = await this.db.transaction(async (tx) => {
      const created = await createApiKey(tx, tenantId, name, scopes);
      await this.audit.record(
        'api_key.created',
        {
          tenantId,
          target: { type: 'api_key', id: created.row.id },
          details: { name, scopes: created.row.scopes },
        },
        tx,
      );
      // An instance that saw this prefix unknown must stop remembering that.
      await this.notifications.publish({ kind: 'api_key_prefix', prefix: created.row.prefix }, tx);
      return created;
    });
    this.unknownPrefixes.delete(row.prefix);
    return { ...row, key };
  }

  async list(tenantId: string): Promise<ApiKeyResponse[]> {
    const { rows } = await this.db.main.query<ApiKeyResponse>(
      `SELECT ${KEY_COLUMNS} FROM api_keys WHERE tenant_id = $1 ORDER BY api_keys.created_at`,
      [tenantId],
    );
    return rows;
  }

  /**
   * Revokes the tenant's key `keyId`, or with `keyId` null (offboarding, in the transaction `tx` that deletes the
   * tenant) every key of the tenant. The revocation, its record and its eviction message commit together: every
   * instance forgets the key at once.
   */
  async revoke(tenantId: string, keyId: string | null, tx?: Sql): Promise<void> {
    const revoke = async (tx: Sql) => {
      const { rows } = await tx.query<{ id: string; key_hash: string; name: string }>(
        `UPDATE api_keys SET revoked_at = now()
          WHERE tenant_id = $1 AND revoked_at IS NULL AND ($2::uuid IS NULL OR id = $2)
          RETURNING id, key_hash, name`,
        [tenantId, keyId],
      );
      for (const row of rows) {
        if (keyId !== null) {
          await this.audit.record(
            'api_key.revoked',
            { tenantId, target: { type: 'api_key', id: row.id }, details: { name: row.name } },
            tx,
          );
        }
        await this.notifications.publish({ kind: 'api_key', hash: row.key_hash }, tx);
      }
      return rows;
    };
    const rows = await (tx ? revoke(tx) : this.db.transaction(revoke));
    if (keyId !== null && rows.length === 0) throw apiKeyNotFound(keyId);
    for (const row of rows) this.cache.delete(row.key_hash);
  }

  /**
   * Rotation without downtime: a successor with the same name and scopes, the old key working for `graceSeconds` more;
   * one transaction, every instance told to read the old key again. A key is rotated once (409 naming its successor).
   */
  async rotate(tenantId: string, keyId: string, graceSeconds: number): Promise<RotatedApiKeyResponse> {
    const now = this.clock.now();
    const expiresAt = new Date(now + graceSeconds * 1000);
    const result = await this.db.transaction(async (tx) => {
      // The old key's new end, if it is still active: the row stays locked until the rotation commits.
      const { rows } = await tx.query<ApiKeyResponse & { key_hash: string }>(
        `UPDATE api_keys SET expires_at = $3
          WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $4)
          RETURNING ${KEY_COLUMNS}, key_hash`,
        [keyId, tenantId, expiresAt, new Date(now)],
      );
      if (!rows[0]) throw apiKeyNotFound(keyId);
      const { key_hash: oldHash, ...old } = rows[0];
      // A statement after the lock sees a successor committed while we waited for it.
      const { rows: successors } = await tx.query<{ id: string }>(
        `SELECT id FROM api_keys WHERE rotated_from = $1`,
        [keyId],
      );
      if (successors[0]) throw apiKeyAlreadyRotated(keyId, successors[0].id);
      const successor = await createApiKey(tx, tenantId, old.name, old.scopes, keyId).catch(
        (error: unknown) => {
          // Two rotations of one key at once: the unique index on rotated_from lets one through.
          if ((error as { code?: string }).code === '23505') throw apiKeyAlreadyRotated(keyId, null);
          throw error;
        },
      );
      await this.audit.record(
        'api_key.rotated',
        {
          tenantId,
          target: { type: 'api_key', id: keyId },
          details: {
            name: old.name,
            successor_id: successor.row.id,
            grace_period_seconds: graceSeconds,
            expires_at: expiresAt.toISOString(),
          },
        },
        tx,
      );
      await this.notifications.publish({ kind: 'api_key', hash: oldHash }, tx);
      await this.notifications.publish({ kind: 'api_key_prefix', prefix: successor.row.prefix }, tx);
      return { previous: old, oldHash, successor };
    });
    this.cache.delete(result.oldHash);
    this.unknownPrefixes.delete(result.successor.row.prefix);
    return {
      ...result.successor.row,
      key: result.successor.key,
      previous_key: result.previous,
    };
  }

  /** Resolves a presented key to its principal, or null (unknown, revoked or expired). */
  async authenticate(presented: string): Promise<Principal | null> {
    if (presented.length < 16 || presented.length > 200) return null;
    const hash = sha256Hex(presented);
    if (timingSafeEqual(Buffer.from(hash, 'hex'), this.operatorKeyHash)) {
      return { kind: 'operator', keyId: null, name: null };
    }
    const entry = this.cache.get(hash)?.value ?? (await this.read(hash, keyPrefix(presented)));
    const now = this.clock.now();
    if (!entry || (entry.keyExpiresAt !== null && entry.keyExpiresAt <= now)) return null;
    // Last use is recorded at most once a minute per key and process, never on the request's critical path.
    if (!this.lastUseWritten.get(hash)) {
      this.lastUseWritten.set(hash, true, LAST_USED_WRITE_INTERVAL_MS);
      this.db.main
        .query(`UPDATE api_keys SET last_used_at = $2 WHERE key_hash = $1`, [hash, new Date(now)])
        .catch((error: unknown) => this.logger.warn(`could not record API key use: ${String(error)}`));
    }
    return entry.principal;
  }

  /** A key not in the cache, from the database (then cached); null when none is active, its prefix remembered. */
  private async read(hash: string, prefix: string | null): Promise<CacheEntry | null> {
    if (prefix && this.unknownPrefixes.get(prefix)) return null;
    const { rows } = await this.db.main.query<
      Pick<ApiKeyResponse, 'id' | 'name' | 'scopes'> & { tenant_id: string | null; expires_at: Date | null }
    >(
      `SELECT id, tenant_id, name, scopes, expires_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
      [hash],
    );
    const row = rows[0];
    if (!row) {
      if (prefix && !(await this.prefixInUse(prefix))) {
        this.unknownPrefixes.set(prefix, true, UNKNOWN_PREFIX_TTL_MS);
      }
      return null;
    }
    const entry: CacheEntry = {
      principal:
        row.tenant_id === null
          ? { kind: 'operator', keyId: row.id, name: row.name }
          : {
              kind: 'tenant',
              tenantId: row.tenant_id,
              keyId: row.id,
              name: row.name,
              scopes: row.scopes.filter(isApiKeyScope),
            },
      keyExpiresAt: row.expires_at?.getTime() ?? null,
    };
    this.cache.set(hash, entry, CACHE_TTL_MS);
    return entry;
  }

  private async prefixInUse(prefix: string): Promise<boolean> {
    const { rows } = await this.db.main.query(
      `SELECT 1 FROM api_keys WHERE prefix = $1 AND revoked_at IS NULL LIMIT 1`,
      [prefix],
    );
    return rows.length > 0;
  }
}
