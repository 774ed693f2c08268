import { Module } from '@nestjs/common';
import { VaultCanary } from './vault-canary';
import { Vault } from './vault.service';

/** The vault, one per process, and its canary (the keys are checked against the data before the app listens). */
@Module({ providers: [Vault, VaultCanary], exports: [Vault, VaultCanary] })
export class VaultModule {}
