import {
  Body,
  Controller,
  Get,
  HttpStatus,
  Param,
  ParseUUIDPipe,
  Post,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendHtml } from '../common/html';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Clock } from '../common/clock';
import { Database } from '../database/database';
import { CommonError } from '../common/app-error';
import { OpsError } from './ops.errors';
import { REWARDS_ENVIRONMENTS, type VaultKey } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { OperatorPage } from '../tenants/auth/auth.decorators';
import { WebhookStore } from '../tenant-webhooks/webhook.store';
import { ACTIVITY_SQL, type ActivityMinute, connectionSummary } from './dashboard.data';
import { ActivityStore } from '../connection-activity/activity.store';
import { LATEST_CALLS_SHOWN, SUMMARY_CAP, connectionPage } from './dashboard.connection-page';
import { dashboardPage, FAILING_ENDPOINTS_SHOWN } from './dashboard.page';
import { Transform, Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, IsUUID, Max, MaxLength, Min } from 'class-validator';
import { CONNECTION_HEALTHS, CONNECTION_STATUSES, OpsService } from './ops.service';
import { runningBatches } from './running-batches';

const blankToUndefined = () =>
  Transform(({ value }: { value: unknown }) => (value === '' ? undefined : value));

/**
 * The dashboard's filter form sends empty strings for "all". After a button, `done` (the action) and `connection` (its
 * id) say what was done; the message is built from the connection as stored — the page never echoes text from the URL.
 */
class DashboardQueryDto {
  @blankToUndefined() @IsOptional() @IsIn(CONNECTION_STATUSES) status?: string;
  @blankToUndefined() @IsOptional() @IsIn(CONNECTION_HEALTHS) health?: string;
  @blankToUndefined() @IsOptional() @IsIn(REWARDS_ENVIRONMENTS) environment?: string;
  @blankToUndefined() @IsOptional() @IsString() @MaxLength(63) tenant?: string;
  @IsOptional() @IsIn(['check', 'refresh']) done?: 'check' | 'refresh';
  @IsOptional() @IsUUID() connection?: string;
  @blankToUndefined() @IsOptional() @Type(() => Number) @IsInt() @Min(0) @Max(10_000_000) offset?: number;
}

const PAGE = 100;

/**
 * `/ops`: server-rendered, operator credentials required (HTTP Basic with the operator key as password, or a
 * Bearer operator key). Without credentials it answers 401 with `WWW-Authenticate: Basic realm="Rewards Gateway ops"`,
 * so a browser asks for them (ApiKeyGuard; failures count in its auth throttle). Buttons post forms protected by a
 * CSRF token and an Origin check.
 */
@ApiExcludeController()
@Controller('ops')
export class DashboardController {
  private readonly csrf: string;

  constructor(
    private readonly ops: OpsService,
    private readonly db: Database,
    private readonly webhooks: WebhookStore,
    private readonly activity: ActivityStore,
    private readonly clock: Clock,
    @InjectConfig('publicBaseUrl') private readonly publicBaseUrl: string,
    @InjectConfig('operatorApiKey') operatorApiKey: string,
    @InjectConfig('vaultKeys') vaultKeys: readonly VaultKey[],
  ) {
    this.csrf = createHmac('sha256', `${operatorApiKey}/${vaultKeys[0].id}`)
      .update('ops-dashboard-csrf')
      .digest('hex');
  }

  @Get()
  @OperatorPage()
  async page(@Query() query: DashboardQueryDto, @Res() res: FastifyReply): Promise<void> {
    // Each part is one bounded read-only statement, run side by side (dashboard.data.ts, running-batches.ts).
    const [{ connections, next_offset }, batches, summary, activity, failingEndpoints] = await Promise.all([
      this.ops.list({ ...query, limit: PAGE, offset: query.offset ?? 0 }),
      runningBatches(this.db.main),
      this.ops.readGaugeCounts().then(connectionSummary),
      this.db.main.query<ActivityMinute>(ACTIVITY_SQL).then(({ rows }) => rows),
      this.webhooks.failingEndpoints(FAILING_ENDPOINTS_SHOWN),
    ]);
    const ids = connections.map((c) => c.id);
    const events = await this.ops.latestEvents(ids, 8);
    const { done: _done, connection: _connection, offset, ...filters } = query;
    const done =
      query.done && query.connection ? await this.outcome(query.done, query.connection) : undefined;
    sendHtml(
      res,
      dashboardPage(
        connections,
        events,
        filters,
        this.csrf,
        done,
        { offset: offset ?? 0, next: next_offset, pageSize: PAGE },
        batches,
        { summary, activity, failingEndpoints },
      ),
    );
  }

  /**
   * One connection's page: the last hour's requests to the rewards service (count, error rate, 429s, p50 / p95
   * latency) and its latest requests, from the connection activity — two bounded reads of the tenant's listing index.
   */
  @Get('connections/:id')
  @OperatorPage()
  async connection(
    @Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string,
    @Res() res: FastifyReply,
  ): Promise<void> {
    const c = await this.ops.detail(id);
    const [summary, rows] = await Promise.all([
      this.activity.summary(c.tenant_id, id, new Date(this.clock.now() - 3600_000), SUMMARY_CAP),
      this.activity.list({ tenantId: c.tenant_id, connectionId: id, limit: LATEST_CALLS_SHOWN }),
    ]);
    sendHtml(res, connectionPage(c, summary, rows));
  }

  /** What the last button did, from the connection's stored state (never from the query string). */
  private async outcome(action: 'check' | 'refresh', id: string): Promise<string | undefined> {
    const result = await this.ops.detail(id).catch(() => null);
    if (!result) return undefined;
    const outcome =
      action === 'check'
        ? result.last_probe?.ok
          ? 'probe ok'
          : `probe failed: ${result.last_probe?.error ?? ''}`
        : `status ${result.status}`;
    return `${action} of ${result.tenant_id} (${result.environment}): ${outcome}`;
  }

  @Post('connections/:id/:action')
  @OperatorPage()
  async act(
    @Param('id', new ParseUUIDPipe({ errorHttpStatusCode: 404 })) id: string,
    @Param('action') action: string,
    @Req() req: FastifyRequest,
    @Body() body: Record<string, unknown>,
    @Res() res: FastifyReply,
  ): Promise<void> {
    this.verifyCsrf(req, body);
    if (action !== 'check' && action !== 'refresh')
      throw new CommonError(HttpStatus.NOT_FOUND, 'not_found', 'Unknown action.');
    if (action === 'check') await this.ops.check(id);
    else await this.ops.refresh(id);
    void res.redirect(`/ops?done=${action}&connection=${id}`, 303);
  }

  private verifyCsrf(req: FastifyRequest, body: Record<string, unknown>): void {
    const origin = req.headers.origin;
    // `Origin: null` (a sandboxed frame, a data: URL, some redirects) is no origin of ours: refused like any other.
    if (
      origin !== undefined &&
      (origin === 'null' || (origin !== new URL(this.publicBaseUrl).origin && !sameHost(origin, req)))
    ) {
      throw new OpsError(HttpStatus.FORBIDDEN, 'csrf_failed', 'Cross-origin form posts are refused.');
    }
    const token = typeof body?.csrf === 'string' ? body.csrf : '';
    if (token.length !== this.csrf.length || !timingSafeEqual(Buffer.from(token), Buffer.from(this.csrf))) {
      throw new OpsError(
        HttpStatus.FORBIDDEN,
        'csrf_failed',
        'The form is missing its CSRF token; reload the page.',
      );
    }
  }
}

function sameHost(origin: string, req: FastifyRequest): boolean {
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}
