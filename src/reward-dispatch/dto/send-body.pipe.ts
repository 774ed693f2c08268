import { Injectable, type PipeTransform } from '@nestjs/common';
import { ValidationFailedError } from '../../common/app-error';
import type { DispatchConfig } from '../../config/app-config';
import { InjectConfig } from '../../config/config.module';
import { type SendRewardsDto, validateSendBody } from './send-rewards.dto';

/**
 * The send route's body check: the body's JSON Schema, compiled by ajv (class-validator and class-transformer would
 * build and walk an instance per reward, far slower for a batch), with up to DISPATCH_MAX_REWARDS rewards.
 * `SendRewardsDto` is a type, not a class, so the global ValidationPipe leaves the parameter alone.
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
