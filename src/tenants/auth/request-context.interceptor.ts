import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import type { Observable } from 'rxjs';
import type { AuditActor, AuditVia } from '../../audit/audit-actions';
import { runInRequestContext } from '../../audit/request-context';
import { requestIdOf } from '../../common/request-id';
import { ApiKeyGuard } from './api-key.guard';
import type { Principal } from './principal';

/** The audit trail's view of a caller. */
export function actorOf(principal: Principal, via: AuditVia): AuditActor {
  if (principal.kind === 'tenant') return { type: 'api_key', id: principal.keyId, name: principal.name, via };
  return principal.keyId === null
    ? { type: 'operator_env_key', id: null, name: null, via }
    : { type: 'operator_key', id: principal.keyId, name: principal.name, via };
}

/**
 * Global: runs each route's handler in its request context — request id (the one of `X-Request-Id` and the log lines),
 * client address, and the caller the guard authenticated (`via: dashboard` on the dashboard's pages) — so that
 * services record audit events without being handed the request. Nest runs the handler inside the async context this
 * interceptor opens (interceptors-consumer binds it).
 */
@Injectable()
export class RequestContextInterceptor implements NestInterceptor {
  constructor(private readonly guard: ApiKeyGuard) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = context.switchToHttp().getRequest<Request & { principal?: Principal }>();
    const via: AuditVia = this.guard.rulesOf(context).basicAllowed ? 'dashboard' : 'api';
    return runInRequestContext(
      {
        requestId: requestIdOf(req),
        clientAddress: req.ip ?? req.socket?.remoteAddress ?? null,
        actor: req.principal ? actorOf(req.principal, via) : null,
      },
      () => next.handle(),
    );
  }
}
