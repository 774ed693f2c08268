import { HttpStatus, Injectable, Logger } from '@nestjs/common';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { Clock } from '../../common/clock';
import { TtlCache } from '../../common/ttl-cache';
import { Database } from '../../database/database';
import { TenantsError } from '../tenants.errors';

/** Failed authentications allowed per client address, and per key prefix, in a window; then 429 for the block. */
export const AUTH_FAILURES_ALLOWED = 20;
const AUTH_FAILURE_WINDOW_S = 60;
const AUTH_BLOCK_S = 60;

/**
 * Throttles failed authentications per client address and per key prefix, counted in Postgres (`auth_failures`) so
 * every instance counts together; only failures cost a write. A block is also remembered in memory, an accelerator.
 */
@Injectable()
export class AuthThrottle {
  private readonly logger = new Logger(AuthThrottle.name);
  private readonly limiter: RateLimiterPostgres;
  /** Key → the end of its block (ms since the epoch), until then. */
  private readonly blockedUntil: TtlCache<number>;

  constructor(
    db: Database,
    private readonly clock: Clock,
  ) {
    this.blockedUntil = new TtlCache(clock, 100_000);
    this.limiter = new RateLimiterPostgres({
      storeClient: db.main,
      storeType: 'pool',
      tableName: 'auth_failures',
      tableCreated: true,
      points: AUTH_FAILURES_ALLOWED,
      duration: AUTH_FAILURE_WINDOW_S,
      blockDuration: AUTH_BLOCK_S,
      inMemoryBlockOnConsumed: AUTH_FAILURES_ALLOWED + 1,
      inMemoryBlockDuration: AUTH_BLOCK_S,
    });
  }

  /** Before looking at a key: refuses at once a client or prefix this instance knows to be blocked. */
  check(address: string, prefix: string | null): void {
    for (const key of this.keys(address, prefix)) {
      const blocked = this.blockedUntil.get(key);
      if (blocked) throw tooMany(blocked.value - this.clock.now());
    }
  }

  /** After a failed authentication: counts it (shared), and refuses with 429 once the limit is passed. */
  async fail(address: string, prefix: string | null): Promise<void> {
    for (const key of this.keys(address, prefix)) {
      try {
        await this.limiter.consume(key);
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) {
          const until = this.clock.now() + rejection.msBeforeNext;
          this.blockedUntil.set(key, until, rejection.msBeforeNext);
          this.logger.warn(
            { throttled: key.startsWith('ip:') ? 'address' : 'key prefix' },
            'failed authentications throttled',
          );
          throw tooMany(rejection.msBeforeNext);
        }
        // The counter store is unavailable: do not turn that into a refusal of the caller.
        this.logger.warn(`auth throttle store: ${(rejection as Error).message}`);
      }
    }
  }

  private keys(address: string, prefix: string | null): string[] {
    return prefix ? [`ip:${address}`, `prefix:${prefix}`] : [`ip:${address}`];
  }
}

function tooMany(ms: number): TenantsError {
  return new TenantsError(
    HttpStatus.TOO_MANY_REQUESTS,
    'too_many_failed_authentications',
    'Too many failed authentications from this client or for this key; retry later.',
    [],
    { 'Retry-After': String(Math.max(1, Math.ceil(ms / 1000))) },
  );
}
