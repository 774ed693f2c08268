import { Module } from '@nestjs/common';

/** TokenVault: encrypted grant storage and the AccessTokenProvider with the cross-process refresh lock. Filled by its own issue; empty until then. */
@Module({})
export class TokenVaultModule {}
