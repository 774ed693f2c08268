import { Module } from '@nestjs/common';

/** RewardsApi: the typed HTTP client of the rewards service (/oauth/token, /api/v2/...), error mapping and timeouts. Filled by its own issue; empty until then. */
@Module({})
export class RewardsApiModule {}
