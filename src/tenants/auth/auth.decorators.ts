import { SetMetadata, applyDecorators } from '@nestjs/common';
import { ApiExtension } from '@nestjs/swagger';
import {
  ApiErrors,
  type ErrorExample,
  insufficientScope,
  OPERATOR_KEY_REQUIRED,
  TENANT_ROUTE,
} from '../../common/api-docs';
import type { ApiKeyScope } from './principal';
import { BASIC_AUTH_ALLOWED, OPERATOR_ONLY, PUBLIC_ROUTE, REQUIRED_SCOPES } from './principal';

/** A route anyone may call (the connect page, the OAuth callback, health). Each use is listed in a test. */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** A route only an operator key may call. */
export const OperatorOnly = () => SetMetadata(OPERATOR_ONLY, true);

/** A route of one tenant for operator keys only, with the error answers it adds to those of every such route. */
export const ForOperators = (...errors: (ErrorExample | readonly ErrorExample[])[]) =>
  applyDecorators(OperatorOnly(), ApiErrors(TENANT_ROUTE, OPERATOR_KEY_REQUIRED, ...errors));

/**
 * A route a tenant key may call when it holds one of `scopes` (operator keys hold every scope); otherwise
 * `403 insufficient_scope`. Every route that is neither public nor operator-only declares its scopes (a test checks
 * every route of the app, and the table in docs/api.md); the OpenAPI document lists them as `x-required-scopes`, with the 403.
 */
export const RequiresScope = (...scopes: [ApiKeyScope, ...ApiKeyScope[]]) =>
  applyDecorators(
    SetMetadata(REQUIRED_SCOPES, scopes),
    ApiExtension('x-required-scopes', scopes),
    ApiErrors(insufficientScope(scopes)),
  );

/** An operator page for browsers: also accepts HTTP Basic with the operator key as the password (any user name). */
export const OperatorPage = () =>
  applyDecorators(SetMetadata(OPERATOR_ONLY, true), SetMetadata(BASIC_AUTH_ALLOWED, true));
