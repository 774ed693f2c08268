import { Injectable, Optional } from '@nestjs/common';
import { Clock } from '../common/clock';
import type { RewardsConfig, RewardsEnvironment } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { AccountPacer, type Priority } from '../rewards-api/account-pacer';
import { CallRecorder } from '../rewards-api/call-recorder';
import { ConnectionClient, type TokenSource } from '../rewards-api/connection-client';
import { RewardsApiClient } from '../rewards-api/rewards-api.client';
import { RewardsApiError } from '../rewards-api/rewards-api.errors';
import { AccessTokenProvider } from './access-token.provider';

/** Calls on a tenant's behalf: each paced per account, with the connection's token read once its slot has come. */
@Injectable()
export class RewardsApi {
  constructor(
    @InjectConfig('rewards') private readonly environments: RewardsConfig,
    private readonly http: RewardsApiClient,
    private readonly tokens: AccessTokenProvider,
    private readonly pacer: AccountPacer,
    private readonly clock: Clock,
    @Optional() private readonly recorder?: CallRecorder,
  ) {}

  /**
   * `priority`: `interactive` for calls a caller waits on, `bulk` for background work (see AccountPacer). `waitUntil`
   * (epoch ms): a slot further out fails with SlotTooFarError.
   */
  forConnection(
    connectionId: string,
    priority: Priority = 'interactive',
    waitUntil: number | null = null,
  ): ConnectionClient {
    return new ConnectionClient(
      this.http,
      this.tokens,
      this.environments,
      connectionId,
      this.clock,
      this.pacer,
      priority,
      waitUntil,
      this.recorder ?? null,
    );
  }

  /**
   * A client for a grant not stored yet (the connect callback asks whose it is): no refresh, no retry after a 401.
   * Paced as `paceAs` (the connection it may replace) when given, else not paced: the account is not known yet.
   */
  forGrant(environment: RewardsEnvironment, accessToken: string, paceAs: string | null): ConnectionClient {
    const grant: TokenSource = {
      environmentOf: async () => environment,
      getAccessToken: async () => ({ token: accessToken, generation: 0, expiresAt: Infinity }),
      unauthorized: async () => {
        throw new RewardsApiError('unauthorized', 'the rewards service refused the token just granted', 401);
      },
    };
    return new ConnectionClient(
      this.http,
      grant,
      this.environments,
      paceAs ?? 'unstored-grant',
      this.clock,
      paceAs ? this.pacer : null,
      'interactive',
    );
  }
}
