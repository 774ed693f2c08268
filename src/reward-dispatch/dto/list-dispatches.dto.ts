import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional } from 'class-validator';
import { PageQueryDto } from '../../common/page-query.dto';
import { DISPATCH_STATUSES } from '../dispatch.view';

export class ListDispatchesDto extends PageQueryDto {
  @ApiPropertyOptional({ enum: DISPATCH_STATUSES })
  @IsOptional()
  @IsIn(DISPATCH_STATUSES)
  status?: string;
}
