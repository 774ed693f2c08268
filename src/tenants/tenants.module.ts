import { Module } from '@nestjs/common';
import { APP_GUARD, APP_INTERCEPTOR } from '@nestjs/core';
import { ApiKeysService } from './api-keys.service';
import { ApiKeyGuard } from './auth/api-key.guard';
import { AuthThrottle } from './auth/auth-throttle';
import { RequestContextInterceptor } from './auth/request-context.interceptor';
import { TenantsController } from './tenants.controller';
import { TenantsService } from './tenants.service';

@Module({
  controllers: [TenantsController],
  providers: [
    TenantsService,
    ApiKeysService,
    AuthThrottle,
    ApiKeyGuard,
    { provide: APP_GUARD, useExisting: ApiKeyGuard },
    { provide: APP_INTERCEPTOR, useClass: RequestContextInterceptor },
  ],
  exports: [TenantsService, ApiKeysService, ApiKeyGuard],
})
export class TenantsModule {}
