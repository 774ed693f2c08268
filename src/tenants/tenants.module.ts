import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiKeysService } from './api-keys.service';
import { ApiKeyGuard } from './auth/api-key.guard';
import { AuthThrottle } from './auth/auth-throttle';
import { TenantsController } from './tenants.controller';
import { TenantsService } from './tenants.service';
import { Retention } from '../retention/retention';

@Module({
  controllers: [TenantsController],
  providers: [
    TenantsService,
    ApiKeysService,
    AuthThrottle,
    ApiKeyGuard,
    { provide: APP_GUARD, useExisting: ApiKeyGuard },
  ],
  exports: [TenantsService, ApiKeysService, ApiKeyGuard],
})
export class TenantsModule {
  constructor(retention: Retention, tenants: TenantsService, keys: ApiKeysService) {
    retention.onOffboard((tx, tenantId) => keys.revoke(tenantId, null, tx));
    retention.registerTenantStep({ name: 'tenants', final: true, purge: (id) => tenants.remove(id) });
  }
}
