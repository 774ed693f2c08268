import type { DynamicModule } from '@nestjs/common';
import { Global, Inject, Module } from '@nestjs/common';
import type { AppConfig } from './app-config';

/** The injection token of one slice of the configuration (for a factory's `inject`). */
export const configToken = (slice: keyof AppConfig) => `config:${slice}`;

/**
 * Injects one slice of the configuration, e.g. `@InjectConfig('dispatch') config: DispatchConfig`. A module sees only
 * what it uses; every slice is frozen.
 */
export const InjectConfig = (slice: keyof AppConfig) => Inject(configToken(slice));

/**
 * The resolved configuration's slices as providers. The configuration is read, completed and frozen before Nest
 * starts (bootstrap.ts): the process fails with one message listing every problem, and the embedded database and
 * the generated secrets exist first.
 */
@Global()
@Module({})
export class AppConfigModule {
  static forRoot(config: AppConfig): DynamicModule {
    const providers = (Object.keys(config) as (keyof AppConfig)[]).map((slice) => ({
      provide: configToken(slice),
      useValue: config[slice],
    }));
    return { module: AppConfigModule, providers, exports: providers };
  }
}
