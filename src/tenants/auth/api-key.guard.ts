import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { HttpStatus, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { ServerResponse } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { AuditActor, AuditVia } from '../../audit/audit-actions';
import { currentRequestContext } from '../../common/request-context';
import { closeAfterAnswer } from '../../common/close-after-answer';
import { AuthThrottle } from './auth-throttle';
import { ApiKeysService, keyPrefix } from '../api-keys.service';
import {
  InsufficientScopeError,
  TenantNotFoundError,
  TenantsError,
  type TenantErrorCode,
} from '../tenants.errors';
import { TenantsService } from '../tenants.service';
import type { ApiKeyScope, Principal } from './principal';
import { BASIC_AUTH_ALLOWED, OPERATOR_ONLY, PUBLIC_ROUTE, REQUIRED_SCOPES } from './principal';

/**
 * Global guard: every route needs `Authorization: Bearer <key>` unless marked @Public().
 * A tenant key reaches only routes whose `:tenant` parameter is its own tenant; any other tenant answers 404,
 * exactly as a tenant that does not exist, so keys cannot probe for other tenants. It must also hold one of the
 * route's scopes (`@RequiresScope`), else 403 insufficient_scope; a route that declares no scope is for operators.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  /** Each route's access rules, read from its decorators once: metadata does not change after start-up. */
  private readonly rules = new WeakMap<object, RouteRules>();

  constructor(
    private readonly reflector: Reflector,
    private readonly apiKeys: ApiKeysService,
    private readonly throttle: AuthThrottle,
    private readonly tenants: TenantsService,
  ) {}

  /**
   * Throws tenant_not_found, operator_key_required or insufficient_scope, in that order: another tenant's path is a
   * 404 whatever the key's scopes, so scopes reveal nothing about other tenants.
   */
  async canActivate(context: ExecutionContext): Promise<boolean> {
    const rules = this.rulesOf(context);
    if (rules.public) return true;
    const req = context.switchToHttp().getRequest<FastifyRequest & { principal?: Principal }>();
    // A body-carrying request was already authenticated from its headers, before its body was read (earlyAuth).
    const principal = req.principal ?? (await this.authenticate(req, rules.basicAllowed));
    req.principal = principal;
    const tenant = (req.params as { tenant?: string } | undefined)?.tenant;
    if (principal.kind === 'tenant' && tenant !== undefined && tenant !== principal.tenantId) {
      throw new TenantNotFoundError(tenant);
    }
    // A route that declares no scope is an operator's: failing closed if a route forgets its decorator.
    if (principal.kind !== 'operator' && (rules.operatorOnly || rules.scopes.length === 0)) {
      throw new TenantsError(
        HttpStatus.FORBIDDEN,
        'operator_key_required',
        'This operation needs an operator API key.',
      );
    }
    if (principal.kind === 'tenant' && !rules.scopes.some((scope) => principal.scopes.includes(scope))) {
      throw new InsufficientScopeError(rules.scopes, principal.scopes);
    }
    // The tenant in the path must exist on every route (an unknown tenant is tenant_not_found, never e.g.
    // connection_not_found); 5-second cache. A tenant key's own tenant exists by construction.
    if (principal.kind === 'operator' && tenant !== undefined) await this.tenants.cached(tenant);
    // The caller of the changes this request makes, for the audit trail (request-context.ts).
    const requestContext = currentRequestContext();
    if (requestContext) requestContext.actor = actorOf(principal, rules.basicAllowed ? 'dashboard' : 'api');
    return true;
  }

  private rulesOf(context: ExecutionContext): RouteRules {
    const handler = context.getHandler();
    const controller = context.getClass();
    let rules = this.rules.get(handler);
    if (rules?.controller !== controller) {
      const targets = [handler, controller];
      const flag = (key: string) => this.reflector.getAllAndOverride<boolean>(key, targets) === true;
      rules = {
        controller,
        public: flag(PUBLIC_ROUTE),
        basicAllowed: flag(BASIC_AUTH_ALLOWED),
        operatorOnly: flag(OPERATOR_ONLY),
        scopes: this.reflector.getAllAndOverride<ApiKeyScope[] | undefined>(REQUIRED_SCOPES, targets) ?? [],
      };
      this.rules.set(handler, rules);
    }
    return rules;
  }

  private async authenticate(req: FastifyRequest, basicAllowed = false): Promise<Principal> {
    const challenge = basicAllowed
      ? 'Basic realm="Rewards Gateway ops", charset="UTF-8"'
      : 'Bearer realm="rewards-gateway"';
    const header = req.headers.authorization;
    if (!header) {
      throw unauthorized('missing_api_key', 'Send an API key as "Authorization: Bearer <key>".', challenge);
    }
    // "Bearer " and nothing else (HTTP trims the trailing space): most often a shell variable that is not set.
    if (/^Bearer\s*$/i.test(header)) {
      throw unauthorized(
        'missing_api_key',
        'The API key is empty: the Authorization header is "Bearer " with no key after it (is the variable holding the key set?).',
        challenge,
      );
    }
    let presented: string | undefined = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    const basic = basicAllowed ? /^Basic\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
    if (basic) {
      const decoded = Buffer.from(basic, 'base64').toString('utf8');
      presented = decoded.slice(decoded.indexOf(':') + 1);
    }
    if (!presented)
      throw unauthorized('invalid_api_key', 'The Authorization header must be "Bearer <key>".', challenge);
    const address = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    const prefix = keyPrefix(presented);
    this.throttle.check(address, prefix);
    const principal = await this.apiKeys.authenticate(presented);
    if (!principal) {
      await this.throttle.fail(address, prefix);
      throw unauthorized(
        'invalid_api_key',
        'The API key is not valid, or was revoked or has expired.',
        challenge,
      );
    }
    return principal;
  }

  /**
   * For routes that take a body (app.factory.ts): authenticates from the headers before a byte of the body is read,
   * so a wrong key never costs a parse (and a throttled client not even a lookup). Routes without a body are
   * authenticated by the guard as usual.
   */
  async earlyAuth(req: FastifyRequest & { principal?: Principal }, res: ServerResponse): Promise<void> {
    const hasBody =
      (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0') ||
      req.headers['transfer-encoding'] !== undefined;
    if (!hasBody) return;
    try {
      req.principal = await this.authenticate(req);
    } catch (error) {
      closeAfterAnswer(req.raw, res); // the unread body is not worth reading
      throw error;
    }
  }
}

interface RouteRules {
  controller: object;
  public: boolean;
  basicAllowed: boolean;
  operatorOnly: boolean;
  /** Any one of these lets a tenant key in; none declared: operators only. */
  scopes: readonly ApiKeyScope[];
}

/** The audit trail's view of a caller; `via` says whether through the API or the dashboard's pages. */
function actorOf(principal: Principal, via: AuditVia): AuditActor {
  if (principal.kind === 'tenant') return { type: 'api_key', id: principal.keyId, name: principal.name, via };
  return principal.keyId === null
    ? { type: 'operator_env_key', id: null, name: null, via }
    : { type: 'operator_key', id: principal.keyId, name: principal.name, via };
}

function unauthorized(code: TenantErrorCode, message: string, challenge: string): TenantsError {
  return new TenantsError(HttpStatus.UNAUTHORIZED, code, message, [], { 'WWW-Authenticate': challenge });
}
