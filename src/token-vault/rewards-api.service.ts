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

/**
 * The entry point for calls on a tenant's behalf: `rewardsApi.forConnection(id)` gives a client whose every call
 * is paced per account and carries the connection's token from the vault, read once its slot has come (with the
 * refresh lock, and the vault's verdict on a 401).
 */
@Injectable()
export class RewardsApi {
  constructor(
    @InjectConfig('rewards') private readonly environments: RewardsConfig,
    private readonly http: RewardsApiClient,
    private readonly tokens: AccessTokenProvider,
    private readonly pacer: AccountPacer,
    private readonly clock: Clock,
    /** The connection activity: every request made for a stored connection is reported there. */
    @Optional() private readonly recorder?: CallRecorder,
  ) {}

  /**
   * `priority`: `interactive` for calls a caller waits on (a send answered inline, a fields reload during one),
   * `bulk` for background work (batches, queued sends, probes, approval checks) — see AccountPacer. `waitUntil`: when
   * an interactive caller stops waiting (epoch ms): a slot further out fails with SlotTooFarError (null: no bound).
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
   * A client for a grant not stored yet: the connect callback asks, with the token it just received, which organization
   * the grant belongs to before deciding to store it. No vault, so no refresh and no retry after a 401. Paced as
   * `paceAs` (the live connection it may replace, most often of the same account) when given, else not paced: the
   * account is not known yet.
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
