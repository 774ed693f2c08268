import { Injectable } from '@nestjs/common';
import type { RewardsConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { AccountPacer, type Priority } from '../rewards-api/account-pacer';
import { ConnectionClient } from '../rewards-api/connection-client';
import { RewardsApiClient } from '../rewards-api/rewards-api.client';
import { AccessTokenProvider } from './access-token.provider';

/**
 * The entry point for calls on a tenant's behalf: `rewardsApi.forConnection(id)` gives a client whose every call
 * carries the connection's token from the vault (with the refresh lock and the retry after a 401), paced per account.
 */
@Injectable()
export class RewardsApi {
  constructor(
    @InjectConfig('rewards') private readonly environments: RewardsConfig,
    private readonly http: RewardsApiClient,
    private readonly tokens: AccessTokenProvider,
    private readonly pacer: AccountPacer,
  ) {}

  /**
   * `priority`: `interactive` for calls a caller waits on (a send answered inline, a fields reload during one),
   * `bulk` for background work (batches, probes, approval checks) — see AccountPacer.
   */
  forConnection(connectionId: string, priority: Priority = 'interactive'): ConnectionClient {
    return new ConnectionClient(
      this.http,
      this.tokens,
      this.environments,
      connectionId,
      this.pacer,
      priority,
    );
  }
}
