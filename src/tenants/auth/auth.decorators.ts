import type { ExecutionContext } from '@nestjs/common';
import { SetMetadata, createParamDecorator } from '@nestjs/common';
import type { Principal } from './principal';
import { OPERATOR_ONLY, PUBLIC_ROUTE } from './principal';

/** A route anyone may call (the connect page, the OAuth callback, health). Each use is listed in a test. */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** A route only an operator key may call. */
export const OperatorOnly = () => SetMetadata(OPERATOR_ONLY, true);

export const CurrentPrincipal = createParamDecorator(
  (_: unknown, ctx: ExecutionContext): Principal => ctx.switchToHttp().getRequest<{ principal: Principal }>().principal,
);
