import { Inject, type Provider } from '@nestjs/common';
import type { AppConfig } from './app-config';

export const configToken = (slice: keyof AppConfig) => `config:${slice}`;

/** Injects one (frozen) slice of the configuration: `@InjectConfig('dispatch') config: DispatchConfig`. */
export const InjectConfig = (slice: keyof AppConfig) => Inject(configToken(slice));

/** The resolved configuration's slices as providers (it is read and completed before Nest starts: bootstrap.ts). */
export const configProviders = (config: AppConfig): Provider[] =>
  (Object.keys(config) as (keyof AppConfig)[]).map((slice) => ({
    provide: configToken(slice),
    useValue: config[slice],
  }));
