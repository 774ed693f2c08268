import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { HttpStatus, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { AppError } from '../../common/app-error';
import { ApiKeysService } from '../api-keys.service';
import { TenantNotFoundError } from '../tenants.service';
import type { Principal } from './principal';
import { OPERATOR_ONLY, PUBLIC_ROUTE } from './principal';

/**
 * Global guard: every route needs `Authorization: Bearer <key>` unless marked @Public().
 * A tenant key reaches only routes whose `:tenant` parameter is its own tenant; any other tenant answers 404,
 * exactly as a tenant that does not exist, so keys cannot probe for other tenants.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly apiKeys: ApiKeysService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)) return true;
    const req = context.switchToHttp().getRequest<Request & { principal?: Principal }>();
    const principal = await this.authenticate(req);
    req.principal = principal;
    const tenantParam = req.params?.tenant as string | undefined;
    if (principal.kind === 'tenant' && tenantParam !== undefined && tenantParam !== principal.tenantId) {
      throw new TenantNotFoundError(tenantParam);
    }
    if (principal.kind !== 'operator' && this.reflector.getAllAndOverride<boolean>(OPERATOR_ONLY, targets)) {
      throw new AppError(HttpStatus.FORBIDDEN, 'operator_key_required', 'This operation needs an operator API key.');
    }
    return true;
  }

  async authenticate(req: Request): Promise<Principal> {
    const header = req.headers.authorization;
    if (!header) {
      throw unauthorized('missing_api_key', 'Send an API key as "Authorization: Bearer <key>".');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw unauthorized('invalid_api_key', 'The Authorization header must be "Bearer <key>".');
    const principal = await this.apiKeys.authenticate(match[1]);
    if (!principal) throw unauthorized('invalid_api_key', 'The API key is not valid or has been revoked.');
    return principal;
  }
}

function unauthorized(code: string, message: string): AppError {
  return new AppError(HttpStatus.UNAUTHORIZED, code, message, [], { 'WWW-Authenticate': 'Bearer realm="rewards-gateway"' });
}
