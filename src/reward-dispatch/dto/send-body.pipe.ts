import { Injectable, type PipeTransform } from '@nestjs/common';
import { ValidationFailedError } from '../../common/app-error';
import type { DispatchConfig } from '../../config/app-config';
import { InjectConfig } from '../../config/config.module';
import { type SendRewardsDto, validateSendBody } from './send-rewards.dto';

/**
 * The send route's body check against its JSON Schema (validateSendBody). `SendRewardsDto` is a type, not a class, so
 * the global ValidationPipe leaves the parameter alone.
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
