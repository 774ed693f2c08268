import { HttpStatus, Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { NotificationsService } from '../database/notifications.service';
import { TenantNotFoundError, TenantsError } from './tenants.errors';
import { TenantEntity } from './entities/tenant.entity';
import type { CreateTenantDto, TenantResponse, UpdateTenantDto } from './dto/tenant.dto';

export { TenantNotFoundError } from './tenants.errors';

const CACHE_TTL_MS = 5_000;

@Injectable()
export class TenantsService {
  private readonly cache = new Map<string, { tenant: TenantEntity; expiresAt: number }>();

  constructor(
    @InjectRepository(TenantEntity) private readonly tenants: Repository<TenantEntity>,
    private readonly notifications: NotificationsService,
  ) {
    notifications.onEviction((eviction) => {
      if (eviction === null) this.cache.clear();
      else if (eviction.kind === 'tenant') this.cache.delete(eviction.id);
    });
  }

  /** The tenant, from a 5-second memory cache (hot path; settings changes reach other instances within 5 s). */
  async cached(id: string): Promise<TenantEntity> {
    const hit = this.cache.get(id);
    if (hit && hit.expiresAt > Date.now()) return hit.tenant;
    const tenant = await this.require(id);
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(id, { tenant, expiresAt: Date.now() + CACHE_TTL_MS });
    return tenant;
  }

  async create(dto: CreateTenantDto): Promise<TenantResponse> {
    const inserted = await this.tenants
      .createQueryBuilder()
      .insert()
      .values({
        id: dto.id,
        name: dto.name,
        returnUrls: dto.return_urls ?? [],
        defaultFundingSourceId: dto.default_funding_source_id ?? null,
      })
      .orIgnore()
      .returning('*')
      .execute();
    if ((inserted.raw as unknown[]).length === 0) {
      throw new TenantsError(
        HttpStatus.CONFLICT,
        'tenant_exists',
        `A tenant with id ${JSON.stringify(dto.id)} already exists.`,
        [{ field: 'id', reason: 'already taken' }],
      );
    }
    return this.get(dto.id);
  }

  async get(id: string): Promise<TenantResponse> {
    return toResponse(await this.require(id));
  }

  async update(id: string, dto: UpdateTenantDto): Promise<TenantResponse> {
    const tenant = await this.require(id);
    if (dto.name !== undefined) tenant.name = dto.name;
    if (dto.return_urls !== undefined) tenant.returnUrls = dto.return_urls;
    if (dto.default_funding_source_id !== undefined)
      tenant.defaultFundingSourceId = dto.default_funding_source_id;
    this.cache.delete(id);
    const saved = await this.tenants.save(tenant);
    await this.notifications.publish({ kind: 'tenant', id });
    return toResponse(saved);
  }

  async require(id: string): Promise<TenantEntity> {
    const tenant = await this.tenants.findOne({ where: { id } });
    if (!tenant) throw new TenantNotFoundError(id);
    return tenant;
  }
}

function toResponse(t: TenantEntity): TenantResponse {
  return {
    id: t.id,
    name: t.name,
    return_urls: t.returnUrls,
    default_funding_source_id: t.defaultFundingSourceId,
    created_at: t.createdAt.toISOString(),
  };
}
