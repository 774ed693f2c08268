import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors } from '../common/api-docs';
import type { HealthCheckResult, HealthIndicatorResult } from '@nestjs/terminus';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { withTimeout } from '../common/schedule';
import { Database } from '../database/database';
import { Public } from '../tenants/auth/auth.decorators';
import { VaultCanary } from '../token-vault/vault-canary';

const DATABASE_TIMEOUT_MS = 1_500;
const EVERY_CHECK_UP = {
  database: { status: 'up' },
  vault: { status: 'up', key_id: 'local1', rotation_pending: false },
};

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly db: Database,
    private readonly indicators: HealthIndicatorService,
    private readonly canary: VaultCanary,
  ) {}

  @Get('live')
  @Public()
  @ApiOperation({ summary: 'Liveness: the process answers.', description: 'Public: no API key.' })
  @ApiOkResponse({
    schema: { type: 'object', example: { status: 'ok' } },
    description: 'The process answers.',
  })
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  @Public()
  @HealthCheck({ noCache: true, swaggerDocumentation: false })
  @ApiOperation({
    summary:
      'Readiness: the database answers within 1.5 s and the vault keys decrypt the vault canary (503 otherwise).',
    description: 'Public: no API key.',
  })
  @ApiOkResponse({
    description: 'Every check is up.',
    schema: {
      type: 'object',
      example: { status: 'ok', info: EVERY_CHECK_UP, error: {}, details: EVERY_CHECK_UP },
    },
  })
  @ApiErrors({
    status: 503,
    code: 'not_ready',
    message: 'A dependency is not available.',
    details: [{ field: 'database', reason: 'timeout of 1500ms exceeded' }],
    when: 'the database does not answer within 1.5 s, or the vault keys do not decrypt the canary',
  })
  ready(): Promise<HealthCheckResult> {
    return this.health.check([() => this.database(), () => this.vault()]);
  }

  /** `database`: a `SELECT 1` on the main pool answers within 1.5 s. */
  private async database(): Promise<HealthIndicatorResult<'database'>> {
    const indicator = this.indicators.check('database');
    try {
      const ms = DATABASE_TIMEOUT_MS;
      await withTimeout(this.db.main.query('SELECT 1'), ms, `timeout of ${ms}ms exceeded`);
      return indicator.up();
    } catch (error) {
      return indicator.down({ message: error instanceof Error ? error.message : String(error) });
    }
  }

  /** `vault`: the configured VAULT_KEYS decrypt the canary (another instance may have rotated to a key this one lacks). */
  private async vault(): Promise<HealthIndicatorResult<'vault'>> {
    const indicator = this.indicators.check('vault');
    try {
      const state = await this.canary.check();
      if (state.state === 'current' || state.state === 'rotation_pending')
        return indicator.up({ key_id: state.keyId, rotation_pending: state.state === 'rotation_pending' });
      if (state.state === 'missing')
        return indicator.down({
          message: 'the vault canary is missing (it is written when a gateway starts)',
        });
      return indicator.down({ message: state.message, key_id: state.keyId });
    } catch (error) {
      return indicator.down({
        message: `the vault canary cannot be read: ${error instanceof Error ? error.message : String(error)}`,
      });
    }
  }
}
