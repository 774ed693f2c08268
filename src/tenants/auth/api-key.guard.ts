import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { HttpStatus, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { ApiKeysService } from '../api-keys.service';
import { TenantNotFoundError, TenantsError, type TenantErrorCode } from '../tenants.errors';
import type { Principal } from './principal';
import { BASIC_AUTH_ALLOWED, OPERATOR_ONLY, PUBLIC_ROUTE } from './principal';

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
    const basicAllowed = this.reflector.getAllAndOverride<boolean>(BASIC_AUTH_ALLOWED, targets) === true;
    const principal = await this.authenticate(req, basicAllowed);
    req.principal = principal;
    const tenantParam = req.params?.tenant as string | undefined;
    if (principal.kind === 'tenant' && tenantParam !== undefined && tenantParam !== principal.tenantId) {
      throw new TenantNotFoundError(tenantParam);
    }
    if (principal.kind !== 'operator' && this.reflector.getAllAndOverride<boolean>(OPERATOR_ONLY, targets)) {
      throw new TenantsError(HttpStatus.FORBIDDEN, 'operator_key_required', 'This operation needs an operator API key.');
    }
    return true;
  }

  async authenticate(req: Request, basicAllowed = false): Promise<Principal> {
    const challenge = basicAllowed ? 'Basic realm="Rewards Gateway ops", charset="UTF-8"' : 'Bearer realm="rewards-gateway"';
    const header = req.headers.authorization;
    if (!header) {
      throw unauthorized('missing_api_key', 'Send an API key as "Authorization: Bearer <key>".', challenge);
    }
    let presented: string | undefined = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    const basic = basicAllowed ? /^Basic\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
    if (basic) {
      const decoded = Buffer.from(basic, 'base64').toString('utf8');
      presented = decoded.slice(decoded.indexOf(':') + 1);
    }
    if (!presented) throw unauthorized('invalid_api_key', 'The Authorization header must be "Bearer <key>".', challenge);
    const principal = await this.apiKeys.authenticate(presented);
    if (!principal) throw unauthorized('invalid_api_key', 'The API key is not valid or has been revoked.', challenge);
    return principal;
  }
}

function unauthorized(code: TenantErrorCode, message: string, challenge: string): TenantsError {
  return new TenantsError(HttpStatus.UNAUTHORIZED, code, message, [], { 'WWW-Authenticate': challenge });
}
