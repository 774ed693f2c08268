import type { DynamicModule } from '@nestjs/common';
import { Global, Inject, Module } from '@nestjs/common';
import type { AppConfig } from './app-config';

export const configToken = (slice: keyof AppConfig) => `config:${slice}`;

/** Injects one (frozen) slice of the configuration: `@InjectConfig('dispatch') config: DispatchConfig`. */
export const InjectConfig = (slice: keyof AppConfig) => Inject(configToken(slice));

/** The resolved configuration's slices as providers (it is read and completed before Nest starts: bootstrap.ts). */
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
