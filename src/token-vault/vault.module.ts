import { Module } from '@nestjs/common';
import { GrantStore } from './grant.store';
import { VaultCanary } from './vault-canary';
import { Vault } from './vault.service';

@Module({ providers: [Vault, VaultCanary, GrantStore], exports: [Vault, VaultCanary, GrantStore] })
export class VaultModule {}
