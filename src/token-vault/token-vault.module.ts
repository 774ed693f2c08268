import { Module } from '@nestjs/common';
import { AccessTokenProvider } from './access-token.provider';

/** Encrypted grant storage and the AccessTokenProvider with the cross-process refresh lock. */
@Module({ providers: [AccessTokenProvider], exports: [AccessTokenProvider] })
export class TokenVaultModule {}
