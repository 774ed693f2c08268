import { Injectable } from '@nestjs/common';
import { AppError } from '../common/app-error';
import { Database } from '../database/database';
import type { UpstreamOrganization } from '../rewards-api/rewards-api.types';
import { RewardsApi } from '../token-vault/rewards-api.service';
import { ConnectionStateStore } from './connection-state.store';

/** A probe of a connection (`GET /organizations` with its token): the outcome and organization recorded on it. */
@Injectable()
export class ConnectionProbe {
  constructor(
    private readonly db: Database,
    private readonly rewardsApi: RewardsApi,
    private readonly state: ConnectionStateStore,
  ) {}

  /** Never throws for the upstream's answer: a failure is recorded as the probe's error. */
  async probe(connectionId: string): Promise<{ ok: boolean; error: string | null }> {
    let organization: UpstreamOrganization | null = null;
    let error: string | null = null;
    try {
      organization = await this.rewardsApi.forConnection(connectionId).probe();
    } catch (e) {
      error = e instanceof AppError ? e.code : e instanceof Error ? e.message : String(e);
    }
    await this.state.recordProbe(this.db.main, connectionId, error === null, error, organization);
    return { ok: error === null, error };
  }
}
