import { Body, Controller, Get, HttpStatus, Inject, Param, ParseUUIDPipe, Post, Query, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Request, Response } from 'express';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { CommonError } from '../common/app-error';
import { OpsError } from './ops.errors';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { OperatorPage } from '../tenants/auth/auth.decorators';
import { dashboardPage, type DashboardEvent } from './dashboard.page';
import { Transform, Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { OpsService } from './ops.service';


const blankToUndefined = () => Transform(({ value }: { value: unknown }) => (value === '' ? undefined : value));

/** The dashboard's filter form sends empty strings for "all"; `done` carries the last action's outcome. */
class DashboardQueryDto {
  @blankToUndefined() @IsOptional() @IsIn(['active', 'needs_reauth', 'error', 'disconnected']) status?: string;
  @blankToUndefined() @IsOptional() @IsIn(['healthy', 'degraded', 'broken', 'idle']) health?: string;
  @blankToUndefined() @IsOptional() @IsIn(['sandbox', 'production']) environment?: string;
  @blankToUndefined() @IsOptional() @IsString() @MaxLength(63) tenant?: string;
  @IsOptional() @IsString() @MaxLength(500) done?: string;
  @blankToUndefined() @IsOptional() @Type(() => Number) @IsInt() @Min(0) @Max(10_000_000) offset?: number;
}

const PAGE = 100;

/**
 * `/ops`: server-rendered, operator credentials required (HTTP Basic with the operator key as password, or a
 * Bearer operator key). Buttons post forms protected by a CSRF token and an Origin check.
 */
@ApiExcludeController()
@Controller('ops')
export class DashboardController {
  private readonly csrf: string;

  constructor(
    private readonly ops: OpsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
  ) {
    this.csrf = createHmac('sha256', `${config.operatorApiKey ?? ''}/${config.vaultKeys[0]?.id ?? ''}`).update('ops-dashboard-csrf').digest('hex');
  }

  @Get()
  @OperatorPage()
  async page(@Query() query: DashboardQueryDto, @Res() res: Response): Promise<void> {
    const { connections, next_offset } = await this.ops.list({ ...query, limit: PAGE, offset: query.offset ?? 0 });
    const events = (await this.db.query(
      `SELECT connection_id, type, detail, at FROM (
         SELECT connection_id, type, detail, at, row_number() OVER (PARTITION BY connection_id ORDER BY id DESC) AS n
           FROM connection_events WHERE connection_id = ANY($1::uuid[])) e WHERE n <= 8 ORDER BY at DESC`,
      [connections.map((c) => c.id)],
    )) as DashboardEvent[];
    const { done: _done, offset, ...filters } = query;
    res.type('html').send(
      dashboardPage(connections, events, { ...filters }, this.csrf, query.done, { offset: offset ?? 0, next: next_offset, pageSize: PAGE }),
    );
  }

  @Post('connections/:id/:action')
  @OperatorPage()
  async act(
    @Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string,
    @Param('action') action: string,
    @Req() req: Request,
    @Body() body: Record<string, unknown>,
    @Res() res: Response,
  ): Promise<void> {
    this.verifyCsrf(req, body);
    if (action !== 'check' && action !== 'refresh') throw new CommonError(HttpStatus.NOT_FOUND, 'not_found', 'Unknown action.');
    const result = action === 'check' ? await this.ops.check(id) : await this.ops.refresh(id);
    const outcome = action === 'check' ? (result.last_probe?.ok ? 'probe ok' : `probe failed: ${result.last_probe?.error ?? ''}`) : `status ${result.status}`;
    res.redirect(303, `/ops?done=${encodeURIComponent(`${action} of ${result.tenant_id} (${result.environment}): ${outcome}`)}`);
  }

  private verifyCsrf(req: Request, body: Record<string, unknown>): void {
    const origin = req.headers.origin;
    if (origin && origin !== 'null' && origin !== new URL(this.config.publicBaseUrl).origin && !sameHost(origin, req)) {
      throw new OpsError(HttpStatus.FORBIDDEN, 'csrf_failed', 'Cross-origin form posts are refused.');
    }
    const token = typeof body?.csrf === 'string' ? body.csrf : '';
    if (token.length !== this.csrf.length || !timingSafeEqual(Buffer.from(token), Buffer.from(this.csrf))) {
      throw new OpsError(HttpStatus.FORBIDDEN, 'csrf_failed', 'The form is missing its CSRF token; reload the page.');
    }
  }
}

function sameHost(origin: string, req: Request): boolean {
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}
