import { Injectable } from '@nestjs/common';
import { AuditLog } from '../audit/audit-log.service';
import { Clock } from '../common/clock';
import { TtlCache } from '../common/ttl-cache';
import { Database } from '../database/database';
import { NotificationsService } from '../database/notifications.service';
import { Retention, RetentionJob } from '../retention/retention';
import { TenantNotFoundError, tenantExists } from './tenants.errors';
import type { CreateTenantDto, TenantResponse, UpdateTenantDto } from './dto/tenant.dto';

const CACHE_TTL_MS = 5_000;

export interface Tenant {
  /** A slug chosen by the platform, e.g. `acme-corp`. */
  id: string;
  name: string;
  /** Allow-list for connect-session `return_url`s. */
  returnUrls: string[];
  defaultFundingSourceId: string | null;
  createdAt: Date;
}

const TENANT_COLUMNS = `id, name, return_urls AS "returnUrls", default_funding_source_id AS "defaultFundingSourceId",
  created_at AS "createdAt"`;

/** Every statement that writes `tenants`. */
@Injectable()
export class TenantsService {
  private readonly cache: TtlCache<Tenant>;

  constructor(
    private readonly db: Database,
    private readonly notifications: NotificationsService,
    private readonly audit: AuditLog,
    private readonly retention: Retention,
    private readonly job: RetentionJob,
    clock: Clock,
  ) {
    this.cache = new TtlCache(clock, 10_000);
    notifications.evictFrom(this.cache, 'tenant', ({ id }) => id);
  }

  /** The tenant, from a 5-second memory cache (hot path; settings changes reach other instances within 5 s). */
  async cached(id: string): Promise<Tenant> {
    return this.cache.getOrLoad(id, CACHE_TTL_MS, () => this.require(id));
  }

  async create(dto: CreateTenantDto): Promise<TenantResponse> {
    const rows = await this.db.transaction(async (tx) => {
      const { rows: inserted } = await tx.query<Tenant>(
        `INSERT INTO tenants (id, name, return_urls, default_funding_source_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) DO NOTHING RETURNING ${TENANT_COLUMNS}`,
        [dto.id, dto.name, dto.return_urls ?? [], dto.default_funding_source_id ?? null],
      );
      if (inserted[0])
        await this.audit.record(
          'tenant.created',
          { tenantId: dto.id, target: { type: 'tenant', id: dto.id }, details: { name: dto.name } },
          tx,
        );
      return inserted;
    });
    if (!rows[0]) {
      throw tenantExists(dto.id);
    }
    return toResponse(rows[0]);
  }

  async get(id: string): Promise<TenantResponse> {
    return toResponse(await this.require(id));
  }

  /** An absent field is left as it is; `default_funding_source_id: null` clears it. */
  async update(id: string, dto: UpdateTenantDto): Promise<TenantResponse> {
    const rows = await this.db.transaction(async (tx) => {
      const { rows: updated } = await tx.query<Tenant>(
        `UPDATE tenants SET name = coalesce($2, name), return_urls = coalesce($3, return_urls),
                default_funding_source_id = CASE WHEN $4 THEN $5 ELSE default_funding_source_id END
          WHERE id = $1 AND deleted_at IS NULL RETURNING ${TENANT_COLUMNS}`,
        [
          id,
          dto.name ?? null,
          dto.return_urls ?? null,
          dto.default_funding_source_id !== undefined,
          dto.default_funding_source_id ?? null,
        ],
      );
      // The fields the request set (their values are in the tenant itself).
      const changed = (['name', 'return_urls', 'default_funding_source_id'] as const).filter(
        (field) => dto[field] !== undefined,
      );
      if (updated[0])
        await this.audit.record(
          'tenant.updated',
          { tenantId: id, target: { type: 'tenant', id }, details: { changed } },
          tx,
        );
      return updated;
    });
    if (!rows[0]) throw new TenantNotFoundError(id);
    this.cache.delete(id);
    await this.notifications.publish({ kind: 'tenant', id });
    return toResponse(rows[0]);
  }

  /**
   * Offboarding, in one transaction that first locks the tenant row (sends holding it finish first): marked deleted,
   * the modules' offboard hooks run (keys revoked, connections disconnected), audited, every instance told. The
   * retention job then removes its data in batches, the row last.
   */
  async delete(id: string): Promise<void> {
    const deleted = await this.db.transaction(async (tx) => {
      const { rows } = await tx.query(
        `SELECT 1 FROM tenants WHERE id = $1 AND deleted_at IS NULL FOR UPDATE`,
        [id],
      );
      if (!rows.length) return false;
      await tx.query(`UPDATE tenants SET deleted_at = now() WHERE id = $1`, [id]);
      for (const hook of this.retention.offboardHooks) await hook(tx, id);
      await this.audit.record('tenant.deleted', { tenantId: id, target: { type: 'tenant', id } }, tx);
      await this.notifications.publish({ kind: 'tenant', id }, tx);
      return true;
    });
    if (!deleted) throw new TenantNotFoundError(id);
    this.cache.delete(id);
    this.job.nudge();
  }

  /** The retention job's last step of a deleted tenant: the row, and what still hangs on it (by foreign keys). */
  async remove(id: string): Promise<number> {
    return (
      (await this.db.main.query(`DELETE FROM tenants WHERE id = $1 AND deleted_at IS NOT NULL`, [id]))
        .rowCount ?? 0
    );
  }

  async require(id: string): Promise<Tenant> {
    const { rows } = await this.db.main.query<Tenant>(
      `SELECT ${TENANT_COLUMNS} FROM tenants WHERE id = $1 AND deleted_at IS NULL`,
      [id],
    );
    if (!rows[0]) throw new TenantNotFoundError(id);
    return rows[0];
  }
}

function toResponse(t: Tenant): TenantResponse {
  return {
    id: t.id,
    name: t.name,
    return_urls: t.returnUrls,
    default_funding_source_id: t.defaultFundingSourceId,
    created_at: t.createdAt.toISOString(),
  };
}
