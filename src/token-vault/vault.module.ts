import { Module } from '@nestjs/common';
import { VaultCanary } from './vault-canary';
import { Vault } from './vault.service';

@Module({ providers: [Vault, VaultCanary], exports: [Vault, VaultCanary] })
export class VaultModule {}
