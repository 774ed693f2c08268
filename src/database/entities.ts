import { ApiKeyEntity } from '../tenants/entities/api-key.entity';
import { TenantEntity } from '../tenants/entities/tenant.entity';

/** Every TypeORM entity of the gateway. */
export const ENTITIES = [TenantEntity, ApiKeyEntity];
