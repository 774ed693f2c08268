import { applyDecorators } from '@nestjs/common';
import {
  ApiBody,
  ApiExtraModels,
  ApiProperty,
  ApiPropertyOptional,
  ApiResponse,
  type ApiResponseOptions,
  ApiSchema,
  type SchemaObject,
  getSchemaPath,
} from '@nestjs/swagger';
import { HttpStatus } from '@nestjs/common';
import { type AppError, type ErrorDetail, ValidationFailedError } from './app-error';
import { invalidJsonError, notJsonError, tooLargeError } from './json-body';
import {
  FieldsError,
  type FieldsErrorCode,
  FieldsUnavailableError,
  CUSTOM_FIELDS_MISMATCH,
} from '../fields-cache/fields-cache.errors';
import type { ApiKeyScope } from '../tenants/auth/principal';
import { InsufficientScopeError, TenantNotFoundError } from '../tenants/tenants.errors';
import {
  AppCredentialsInvalidError,
  ConnectionNotActiveError,
  ConnectionNotFoundError,
  RefreshBackoffError,
  RefreshFailedError,
  RefreshLockTimeoutError,
} from '../token-vault/token-vault.errors';

/**
 * OpenAPI for the one error shape (`{"error": {"code", "message", "details"}}`): the `ErrorResponse` schema,
 * `ApiErrors(...)` to declare a route's error answers, and a catalogue of examples — built from the modules' own
 * errors where they have a class. Docs only: nothing here changes what a route answers.
 */

@ApiSchema({
  name: 'ErrorDetail',
  description:
    'One problem: the offending input and why. Some codes add fields (`known_labels`, `allowed_values`, `dispatch_id`, ' +
    '`upstream_status`, `upstream_payload`, …).',
})
export class ErrorDetailDoc {
  @ApiPropertyOptional({
    example: 'rewards[0].recipient.email',
    description: 'Dotted path of the offending input: a body field, a header or a query parameter.',
  })
  field?: string;

  @ApiProperty({ example: 'rewards[0].recipient.email must be an e-mail address' })
  reason: string;
}

@ApiSchema({ name: 'ErrorBody' })
export class ErrorBodyDoc {
  @ApiProperty({
    example: 'validation_failed',
    description:
      'Stable snake_case code to switch on (docs/api.md, "Error codes"); each module declares its codes in `*.errors.ts`.',
  })
  code: string;

  @ApiProperty({ example: 'The request is invalid; see details for each field.' })
  message: string;

  @ApiProperty({ type: [ErrorDetailDoc] })
  details: ErrorDetailDoc[];

  @ApiPropertyOptional({
    description: 'On 500 internal_error only: the request id that identifies the error in the logs.',
  })
  request_id?: string;
}

@ApiSchema({
  name: 'ErrorResponse',
  description: 'Every error answer of the gateway: `{"error": {"code", "message", "details"}}`.',
})
export class ErrorResponse {
  @ApiProperty({ type: ErrorBodyDoc })
  error: ErrorBodyDoc;
}

/** One error answer of a route: its status, a real body, and when it happens (the example's summary). */
export interface ErrorExample {
  status: number;
  /** A code a module declares (the OpenAPI test checks every example's). */
  code: string;
  message: string;
  details?: ErrorDetail[];
  when?: string;
}

/** The example of an error as a module throws it. */
export const example = (error: AppError, when: string): ErrorExample => ({
  status: error.status,
  code: error.code,
  message: error.message,
  details: error.details,
  when,
});

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not found',
  409: 'Conflict',
  413: 'Payload too large',
  415: 'Unsupported media type',
  422: 'Unprocessable',
  429: 'Too many requests',
  502: 'Bad gateway',
  503: 'Service unavailable',
};

const RETRY_AFTER = {
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
};

/** A route's (or a controller's) error answers: one response per status, one example per case. */
export function ApiErrors(...errors: (ErrorExample | readonly ErrorExample[])[]) {
  const byStatus = new Map<number, ErrorExample[]>();
  for (const error of errors.flat())
    byStatus.set(error.status, [...(byStatus.get(error.status) ?? []), error]);
  const decorators: (ClassDecorator | MethodDecorator | PropertyDecorator)[] = [
    ApiExtraModels(ErrorResponse),
  ];
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const examples: Record<string, { summary: string; value: unknown }> = {};
    for (const e of list) {
      let key: string = e.code;
      for (let n = 2; key in examples; n++) key = `${e.code}_${n}`;
      examples[key] = {
        summary: e.when ?? e.code,
        value: { error: { code: e.code, message: e.message, details: e.details ?? [] } },
      };
    }
    const codes = [...new Set(list.map((e) => `\`${e.code}\``))].join(' · ');
    decorators.push(
      ApiResponse({
        status,
        description: `${STATUS_TEXT[status] ?? 'Error'}: ${codes}.`,
        schema: { $ref: getSchemaPath(ErrorResponse) },
        examples,
        ...(status === 429 || status === 503 ? { headers: RETRY_AFTER } : {}),
      } as ApiResponseOptions),
    );
  }
  return applyDecorators(...decorators);
}

/** A JSON request body (a DTO class, or the JSON Schema the route validates with) with named working examples. */
export function ApiJsonBody(
  body: (new (...args: never[]) => unknown) | object,
  examples: Record<string, { summary: string; description?: string; value: unknown }>,
  description?: string,
) {
  if (typeof body !== 'function')
    return ApiBody({ schema: body as SchemaObject, examples, required: true, description });
  return applyDecorators(
    ApiExtraModels(body),
    ApiBody({ schema: { $ref: getSchemaPath(body) }, examples, required: true, description }),
  );
}

// --- the catalogue: codes and messages as the modules answer them ---------------------------------------------------

const EXAMPLE_ID = '3f2b8c1e-5d4a-4e7b-9c0d-2a1b3c4d5e6f';

/** `validation_failed` naming one field. */
export const validationFailed = (field: string, reason: string, message?: string): ErrorExample =>
  example(new ValidationFailedError([{ field, reason }], message), `a bad ${field}`);

/** A path id that is not a UUID: answered like an unknown route. */
export function notAUuid(method: string, path: string): ErrorExample {
  return {
    status: 404,
    code: 'not_found',
    message: `No route ${method} ${path}.`,
    when: 'the id in the path is not a UUID',
  };
}

/** Every route behind an API key: no key, a wrong or revoked one, too many failures. */
export const AUTH: readonly ErrorExample[] = [
  {
    status: 401,
    code: 'missing_api_key',
    message: 'Send an API key as "Authorization: Bearer <key>".',
    when: 'no Authorization header, or `Bearer ` with no key after it',
  },
  {
    status: 401,
    code: 'invalid_api_key',
    message: 'The API key is not valid, or was revoked or has expired.',
    when: 'a wrong, revoked or expired key (a rotated key after its grace period)',
  },
  {
    status: 429,
    code: 'too_many_failed_authentications',
    message: 'Too many failed authentications from this client or for this key; retry later.',
    when: 'more than 20 failed authentications in a minute from this address or for this key prefix',
  },
];

export const OPERATOR_KEY_REQUIRED: ErrorExample = {
  status: 403,
  code: 'operator_key_required',
  message: 'This operation needs an operator API key.',
  when: 'called with a tenant key',
};

/** A tenant key without any of the route's scopes (the `RequiresScope` decorator documents it on each route). */
export const insufficientScope = (scopes: readonly ApiKeyScope[]): ErrorExample =>
  example(new InsufficientScopeError(scopes, ['rewards:read']), 'a tenant key without that scope');

const TENANT_NOT_FOUND = example(
  new TenantNotFoundError('acme'),
  'an unknown tenant, or another tenant than the key’s own',
);

/** Routes under `/v1/tenants/{tenant}`: any key, the tenant must exist and be the key's own. */
export const TENANT_ROUTE: readonly ErrorExample[] = [...AUTH, TENANT_NOT_FOUND];
export const OPERATOR_ROUTE: readonly ErrorExample[] = [...AUTH, OPERATOR_KEY_REQUIRED];

/** What the JSON body reader answers before a route sees the body (common/json-body.ts). */
export const jsonBodyErrors = (maxMiB = 1): ErrorExample[] => [
  example(invalidJsonError(), 'the body does not parse'),
  example(tooLargeError(maxMiB * 1024 * 1024), `a body over ${maxMiB} MiB`),
  example(notJsonError('text/plain'), 'a body that is not application/json (or compressed)'),
];
export const JSON_BODY: readonly ErrorExample[] = jsonBodyErrors();

export const ENVIRONMENT_NOT_CONFIGURED: ErrorExample = {
  status: 422,
  code: 'environment_not_configured',
  message: 'The production environment is not configured on this gateway.',
  details: [{ field: 'environment', reason: 'configured: sandbox' }],
  when: 'an environment the gateway has no credentials for',
};

export const CONNECTION_NOT_FOUND = example(
  new ConnectionNotFoundError('sandbox', 'acme'),
  'the tenant never connected this environment',
);

export const CONNECTION_NOT_ACTIVE = example(
  new ConnectionNotActiveError('needs_reauth'),
  'the connection needs a new consent, or was disconnected (`reason`: `disconnected`)',
);

/** What reading the connection's token can answer (token-vault), besides not found / not active. */
export const VAULT_UNAVAILABLE: readonly ErrorExample[] = [
  example(new RefreshBackoffError(1), 'a recent refresh failed (cooldown)'),
  example(new RefreshFailedError('no answer from the rewards service', 1), 'this refresh failed transiently'),
  example(new RefreshLockTimeoutError(), 'another instance holds the refresh lock'),
  example(
    new AppCredentialsInvalidError('sandbox'),
    'the rewards service refuses the gateway’s own client credentials',
  ),
];

export const FIELDS_UNAVAILABLE = example(
  new FieldsUnavailableError(),
  'the fields cannot be read and no copy is cached',
);

const customFields = (code: FieldsErrorCode, detail: ErrorDetail, when: string) =>
  example(new FieldsError(HttpStatus.UNPROCESSABLE_ENTITY, code, CUSTOM_FIELDS_MISMATCH, [detail]), when);

export const CUSTOM_FIELD_ERRORS: readonly ErrorExample[] = [
  customFields(
    'unknown_custom_field',
    {
      field: 'rewards[0].custom_fields.Dept',
      reason: 'unknown custom field label "Dept"',
      known_labels: ['Department', 'Campaign', 'Region'],
    },
    'a label or id the account does not have',
  ),
  customFields(
    'invalid_custom_field_value',
    {
      field: 'rewards[0].custom_fields.Department',
      reason: '"Legal" is not an option of "Department"',
      allowed_values: ['Sales', 'Engineering', 'Support', 'Marketing'],
    },
    'a value outside the options or of the wrong type',
  ),
  customFields(
    'missing_required_custom_field',
    { field: 'rewards[0].custom_fields.Department', reason: 'custom field "Department" is required' },
    'a required field is missing',
  ),
  customFields(
    'invalid_custom_fields',
    { field: 'rewards[0].custom_fields[1]', reason: 'custom field "Department" is given twice' },
    'a field given twice',
  ),
];

export const DISPATCH_NOT_FOUND: ErrorExample = {
  status: 404,
  code: 'dispatch_not_found',
  message: `No dispatch ${EXAMPLE_ID} for this tenant.`,
  when: 'no such dispatch for this tenant',
};

export const WEBHOOK_ENDPOINT_NOT_FOUND: ErrorExample = {
  status: 404,
  code: 'webhook_endpoint_not_found',
  message: `No webhook endpoint "${EXAMPLE_ID}" for this tenant.`,
  when: 'no such endpoint for this tenant',
};

export const OPS_CONNECTION_NOT_FOUND: ErrorExample = {
  status: 404,
  code: 'connection_not_found',
  message: `No connection ${EXAMPLE_ID}.`,
  when: 'no connection with this id',
};

export const OPS_CONNECTION_DISCONNECTED: ErrorExample = {
  status: 409,
  code: 'connection_not_active',
  message: 'The connection is disconnected.',
  when: 'the connection is disconnected',
};
