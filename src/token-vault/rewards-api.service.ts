import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { ConnectionClient } from '../rewards-api/connection-client';
import { RewardsApiClient } from '../rewards-api/rewards-api.client';
import { AccessTokenProvider } from './access-token.provider';

/**
 * The entry point for calls on a tenant's behalf: `rewardsApi.forConnection(id)` gives a client whose every call
 * carries the connection's token from the vault (with the refresh lock and the retry after a 401).
 */
@Injectable()
export class RewardsApi {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly http: RewardsApiClient,
    private readonly tokens: AccessTokenProvider,
  ) {}

  forConnection(connectionId: string): ConnectionClient {
    return new ConnectionClient(this.http, this.tokens, this.config.rewards, connectionId);
  }
}
