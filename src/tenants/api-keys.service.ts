import { HttpStatus, Injectable, Logger } from '@nestjs/common';
import { Database } from '../database/database';
import { NotificationsService } from '../database/notifications.service';
import type { Sql } from '../database/sql';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../common/digest';
import { InjectConfig } from '../config/config.module';
import { TenantsError } from './tenants.errors';
import type { ApiKeyResponse, CreatedApiKeyResponse } from './dto/tenant.dto';
import type { Principal } from './auth/principal';

const CACHE_TTL_MS = 10_000;
/** A key prefix that matches no key is remembered this long: repeated junk keys cost no database lookup. */
const UNKNOWN_PREFIX_TTL_MS = 60_000;

/** The part of a key that identifies it without revealing it (`rgk_` + 4 characters), as stored in `api_keys.prefix`. */
export function keyPrefix(presented: string): string | null {
  return /^rg[ko]_[A-Za-z0-9_-]{4}/.test(presented) ? presented.slice(0, 8) : null;
}
const CACHE_MAX_ENTRIES = 10_000;
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

export function hashApiKey(key: string): string {
  return sha256Hex(key);
}

/** An API key's row; only its SHA-256 hash is stored. `tenant_id` null: an operator key. */
interface ApiKeyRow {
  id: string;
  tenant_id: string | null;
  name: string;
  /** The first characters of the key, to recognise it in listings. */
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/**
 * Creates a key with 256 bits of randomness (`rgk_` for a tenant, `rgo_` for an operator) and stores its hash.
 * The plaintext is returned here only. Also the CLI's `operator-key:create`.
 */
export async function createApiKey(
  db: Sql,
  tenantId: string | null,
  name: string,
): Promise<{ row: ApiKeyRow; key: string }> {
  const key = `${tenantId ? 'rgk' : 'rgo'}_${randomBytes(32).toString('base64url')}`;
  const { rows } = await db.query<ApiKeyRow>(
    `INSERT INTO api_keys (tenant_id, name, key_hash, prefix) VALUES ($1, $2, $3, $4)
     RETURNING id, tenant_id, name, prefix, created_at, last_used_at, revoked_at`,
    [tenantId, name, hashApiKey(key), key.slice(0, 8)],
  );
  return { row: rows[0], key };
}

/**
 * API keys (every statement that writes `api_keys`): created with 256 bits of randomness, stored as SHA-256 hashes,
 * shown once.
 * Authentication results are cached in memory for 10 s, an accelerator only: a revocation is published through
 * Postgres NOTIFY in its own transaction, and every instance drops the key from its cache when it commits.
 */
@Injectable()
export class ApiKeysService {
  private readonly logger = new Logger(ApiKeysService.name);
  private readonly cache = new Map<
    string,
    { principal: Principal; expiresAt: number; lastUsedWrite: number }
  >();
  private readonly operatorKeyHash: Buffer;
  private readonly unknownPrefixes = new Map<string, number>();

  constructor(
    private readonly db: Database,
    @InjectConfig('operatorApiKey') operatorApiKey: string,
    private readonly notifications: NotificationsService,
  ) {
    this.operatorKeyHash = Buffer.from(hashApiKey(operatorApiKey), 'hex');
    notifications.onEviction((eviction) => {
      if (eviction === null) this.cache.clear();
      else if (eviction.kind === 'api_key') this.cache.delete(eviction.hash);
      else if (eviction.kind === 'api_key_prefix') this.unknownPrefixes.delete(eviction.prefix);
    });
  }

  async create(tenantId: string | null, name: string): Promise<CreatedApiKeyResponse> {
    const { row, key } = await createApiKey(this.db.main, tenantId, name);
    // An instance that saw this prefix unknown must stop remembering that.
    this.unknownPrefixes.delete(row.prefix);
    await this.notifications.publish({ kind: 'api_key_prefix', prefix: row.prefix });
    return { ...toResponse(row), key };
  }

  async list(tenantId: string): Promise<ApiKeyResponse[]> {
    const { rows } = await this.db.main.query<ApiKeyRow>(
      `SELECT id, tenant_id, name, prefix, created_at, last_used_at, revoked_at FROM api_keys
        WHERE tenant_id = $1 ORDER BY created_at`,
      [tenantId],
    );
    return rows.map(toResponse);
  }

  async revoke(tenantId: string | null, keyId: string): Promise<void> {
    // The revocation and its eviction message commit together: every instance forgets the key at once.
    const rows = await this.db.transaction(async (tx) => {
      const { rows: revoked } = await tx.query<{ key_hash: string }>(
        `UPDATE api_keys SET revoked_at = now()
          WHERE id = $1 AND revoked_at IS NULL AND tenant_id IS NOT DISTINCT FROM $2
          RETURNING key_hash`,
        [keyId, tenantId],
      );
      for (const row of revoked)
        await this.notifications.publish({ kind: 'api_key', hash: row.key_hash }, tx);
      return revoked;
    });
    if (rows.length === 0)
      throw new TenantsError(
        HttpStatus.NOT_FOUND,
        'api_key_not_found',
        `No active API key ${keyId} for this tenant.`,
      );
    for (const row of rows) this.cache.delete(row.key_hash);
  }

  /** Resolves a presented key to its principal, or null. */
  async authenticate(presented: string): Promise<Principal | null> {
    if (presented.length < 16 || presented.length > 200) return null;
    const hash = hashApiKey(presented);
    if (timingSafeEqual(Buffer.from(hash, 'hex'), this.operatorKeyHash)) {
      return { kind: 'operator', keyId: null };
    }
    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached && cached.expiresAt > now) {
      this.touch(hash, cached);
      return cached.principal;
    }
    const prefix = keyPrefix(presented);
    if (prefix && (this.unknownPrefixes.get(prefix) ?? 0) > now) return null;
    const { rows } = await this.db.main.query<{ id: string; tenant_id: string | null }>(
      `SELECT id, tenant_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
      [hash],
    );
    const row = rows[0];
    if (!row) {
      this.cache.delete(hash);
      if (prefix && !(await this.prefixInUse(prefix))) {
        if (this.unknownPrefixes.size >= CACHE_MAX_ENTRIES) this.unknownPrefixes.clear();
        this.unknownPrefixes.set(prefix, now + UNKNOWN_PREFIX_TTL_MS);
      }
      return null;
    }
    const principal: Principal =
      row.tenant_id === null
        ? { kind: 'operator', keyId: row.id }
        : { kind: 'tenant', tenantId: row.tenant_id, keyId: row.id };
    if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.clear();
    const entry = { principal, expiresAt: now + CACHE_TTL_MS, lastUsedWrite: cached?.lastUsedWrite ?? 0 };
    this.cache.set(hash, entry);
    this.touch(hash, entry);
    return principal;
  }

  /** Records last use at most once a minute per key and process; never on the request's critical path. */
  private touch(hash: string, entry: { lastUsedWrite: number }): void {
    const now = Date.now();
    if (now - entry.lastUsedWrite < LAST_USED_WRITE_INTERVAL_MS) return;
    entry.lastUsedWrite = now;
    this.db.main
      .query(`UPDATE api_keys SET last_used_at = $2 WHERE key_hash = $1`, [hash, new Date(now)])
      .catch((error: unknown) => this.logger.warn(`could not record API key use: ${String(error)}`));
  }

  private async prefixInUse(prefix: string): Promise<boolean> {
    const { rows } = await this.db.main.query(
      `SELECT 1 FROM api_keys WHERE prefix = $1 AND revoked_at IS NULL LIMIT 1`,
      [prefix],
    );
    return rows.length > 0;
  }
}

function toResponse(row: ApiKeyRow): ApiKeyResponse {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
    revoked_at: row.revoked_at?.toISOString() ?? null,
  };
}
