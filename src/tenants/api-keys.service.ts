import { HttpStatus, Inject, Injectable, Logger } from '@nestjs/common';
import { NotificationsService } from '../database/notifications.service';
import { inTransaction, mainPool } from '../database/sql';
import { InjectRepository } from '@nestjs/typeorm';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../common/digest';
import { IsNull, Repository } from 'typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { TenantsError } from './tenants.errors';
import { ApiKeyEntity } from './entities/api-key.entity';
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

/**
 * API keys: created with 256 bits of randomness, stored as SHA-256 hashes, shown once.
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
  private readonly operatorKeyHash: Buffer | null;
  private readonly unknownPrefixes = new Map<string, number>();

  constructor(
    @InjectRepository(ApiKeyEntity) private readonly keys: Repository<ApiKeyEntity>,
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly notifications: NotificationsService,
  ) {
    this.operatorKeyHash = config.operatorApiKey
      ? Buffer.from(hashApiKey(config.operatorApiKey), 'hex')
      : null;
    notifications.onEviction((eviction) => {
      if (eviction === null) this.cache.clear();
      else if (eviction.kind === 'api_key') this.cache.delete(eviction.hash);
      else if (eviction.kind === 'api_key_prefix') this.unknownPrefixes.delete(eviction.prefix);
    });
  }

  async create(tenantId: string | null, name: string): Promise<CreatedApiKeyResponse> {
    const key = `${tenantId ? 'rgk' : 'rgo'}_${randomBytes(32).toString('base64url')}`;
    const entity = await this.keys.save(
      this.keys.create({ tenantId, name, keyHash: hashApiKey(key), prefix: key.slice(0, 8) }),
    );
    // An instance that saw this prefix unknown must stop remembering that.
    this.unknownPrefixes.delete(entity.prefix);
    await this.notifications.publish({ kind: 'api_key_prefix', prefix: entity.prefix });
    return { ...toResponse(entity), key };
  }

  async list(tenantId: string): Promise<ApiKeyResponse[]> {
    const rows = await this.keys.find({ where: { tenantId }, order: { createdAt: 'ASC' } });
    return rows.map(toResponse);
  }

  async revoke(tenantId: string | null, keyId: string): Promise<void> {
    // The revocation and its eviction message commit together: every instance forgets the key at once.
    const rows = await inTransaction(mainPool(this.keys.manager.connection), async (tx) => {
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
    if (this.operatorKeyHash && timingSafeEqual(Buffer.from(hash, 'hex'), this.operatorKeyHash)) {
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
    const row = await this.keys.findOne({ where: { keyHash: hash, revokedAt: IsNull() } });
    if (!row) {
      this.cache.delete(hash);
      if (prefix && !(await this.keys.exists({ where: { prefix, revokedAt: IsNull() } }))) {
        if (this.unknownPrefixes.size >= CACHE_MAX_ENTRIES) this.unknownPrefixes.clear();
        this.unknownPrefixes.set(prefix, now + UNKNOWN_PREFIX_TTL_MS);
      }
      return null;
    }
    const principal: Principal =
      row.tenantId === null
        ? { kind: 'operator', keyId: row.id }
        : { kind: 'tenant', tenantId: row.tenantId, keyId: row.id };
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
    this.keys
      .update({ keyHash: hash }, { lastUsedAt: new Date(now) })
      .catch((error: unknown) => this.logger.warn(`could not record API key use: ${String(error)}`));
  }
}

function toResponse(entity: ApiKeyEntity): ApiKeyResponse {
  return {
    id: entity.id,
    name: entity.name,
    prefix: entity.prefix,
    created_at: entity.createdAt.toISOString(),
    last_used_at: entity.lastUsedAt?.toISOString() ?? null,
    revoked_at: entity.revokedAt?.toISOString() ?? null,
  };
}
