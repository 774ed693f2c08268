import { Injectable, type PipeTransform } from '@nestjs/common';
import { ValidationFailedError } from '../../common/app-error';
import type { DispatchConfig } from '../../config/app-config';
import { InjectConfig } from '../../config/config.module';
import type { SendRewardsDto } from './send-rewards.dto';
import { validateSendBody } from './send-rewards.schema';

/**
 * The send route's body check: the compiled ajv schema equivalent to `SendRewardsDto` (send-rewards.schema.spec.ts
 * keeps the two from drifting), much cheaper than the class-validator pipe, so a batch of 10,000 rewards is checked
 * without a noticeable pause, and bounded to 100 details. The parameter is typed as
 * an interface so the global ValidationPipe leaves it alone. Up to DISPATCH_MAX_REWARDS rewards.
 */
@Injectable()
export class SendBodyPipe implements PipeTransform<unknown, SendRewardsDto> {
  constructor(@InjectConfig('dispatch') private readonly config: DispatchConfig) {}

  transform(body: unknown): SendRewardsDto {
    const details = validateSendBody(body, this.config.maxRewards);
    if (details.length) throw new ValidationFailedError(details);
    return (body ?? {}) as SendRewardsDto;
  }
}

/**
 * The send body as the pipe hands it over. An intersection type: its design-time type is `Object`, which the global
 * ValidationPipe skips (the DTO class itself would be validated a second time).
 */
export type SendRewardsBody = SendRewardsDto & Record<never, never>;
