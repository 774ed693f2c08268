import type { ExecutionContext } from '@nestjs/common';
import { SetMetadata, createParamDecorator } from '@nestjs/common';
import type { Principal } from './principal';
import { BASIC_AUTH_ALLOWED, OPERATOR_ONLY, PUBLIC_ROUTE } from './principal';

/** A route anyone may call (the connect page, the OAuth callback, health). Each use is listed in a test. */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** A route only an operator key may call. */
export const OperatorOnly = () => SetMetadata(OPERATOR_ONLY, true);

export const CurrentPrincipal = createParamDecorator(
  (_: unknown, ctx: ExecutionContext): Principal =>
    ctx.switchToHttp().getRequest<{ principal: Principal }>().principal,
);

/** An operator page for browsers: also accepts HTTP Basic with the operator key as the password (any user name). */
export const OperatorPage =
  () => (target: object, key?: string | symbol, descriptor?: PropertyDescriptor) => {
    SetMetadata(OPERATOR_ONLY, true)(target, key as string, descriptor as PropertyDescriptor);
    SetMetadata(BASIC_AUTH_ALLOWED, true)(target, key as string, descriptor as PropertyDescriptor);
  };
