import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors, OPERATOR_ROUTE, TENANT_ROUTE, validationFailed } from '../common/api-docs';
import { INVALID_CURSOR } from '../common/page-query.dto';
import { OperatorOnly, RequiresScope } from '../tenants/auth/auth.decorators';
import { AUDIT_ACTIONS } from './audit-actions';
import { AuditStore } from './audit.store';
import { AuditEventListResponse, AuditQueryDto, OpsAuditQueryDto } from './dto/audit.dto';

const QUERY_ERRORS = [
  validationFailed('action', `action must be one of the following values: ${AUDIT_ACTIONS.join(', ')}`),
  INVALID_CURSOR,
];

/** The audit trail: a tenant's own changes, and every change for operators. */
@ApiTags('audit')
@ApiBearerAuth()
@Controller()
export class AuditController {
  constructor(private readonly audit: AuditStore) {}

  @Get('v1/tenants/:tenant/audit-events')
  @RequiresScope('connection:manage')
  @ApiOperation({
    summary:
      'The tenant’s audit trail, newest first: who changed what, when, from where (key with connection:manage).',
    description: 'Page with `cursor`: pass the `next_cursor` of each answer until it is null.',
  })
  @ApiOkResponse({ type: AuditEventListResponse })
  @ApiErrors(TENANT_ROUTE, ...QUERY_ERRORS)
  listForTenant(
    @Param('tenant') tenant: string,
    @Query() query: AuditQueryDto,
  ): Promise<AuditEventListResponse> {
    return this.audit.page({ ...query, tenantId: tenant });
  }

  @Get('v1/ops/audit-events')
  @OperatorOnly()
  @ApiOperation({
    summary: 'Every audit record, newest first, optionally of one tenant and one action (operator key).',
    description:
      'Page with `cursor`: pass the `next_cursor` of each answer until it is null. A deleted tenant’s records stay listed.',
  })
  @ApiOkResponse({ type: AuditEventListResponse })
  @ApiErrors(
    OPERATOR_ROUTE,
    ...QUERY_ERRORS,
    validationFailed('tenant', 'tenant must be a tenant id (a slug)'),
  )
  listAll(@Query() query: OpsAuditQueryDto): Promise<AuditEventListResponse> {
    const { tenant, ...rest } = query;
    return this.audit.page({ ...rest, tenantId: tenant });
  }
}
