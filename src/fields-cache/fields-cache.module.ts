import { Module } from '@nestjs/common';

/** FieldsCache: the per-connection fields cache, label → id resolution and custom-field validation. Filled by its own issue; empty until then. */
@Module({})
export class FieldsCacheModule {}
