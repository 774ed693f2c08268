import { Module } from '@nestjs/common';

/** RewardDispatch: the send API, idempotency, dispatch records, the retry worker and reward listing. Filled by its own issue; empty until then. */
@Module({})
export class RewardDispatchModule {}
