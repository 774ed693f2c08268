import type { DynamicModule } from '@nestjs/common';
import { Global, Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import type { AppConfig } from './app-config';

/** Injection token of the validated, typed `AppConfig`. */
export const APP_CONFIG = Symbol('APP_CONFIG');

/**
 * The configuration is parsed and validated once, before Nest starts (main.ts), so the process can fail with one
 * message listing every problem and the embedded database can start first. This module only provides the result;
 * `@nestjs/config`'s ConfigService also carries it for code that prefers that interface.
 */
@Global()
@Module({})
export class AppConfigModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppConfigModule,
      imports: [
        ConfigModule.forRoot({ ignoreEnvFile: true, isGlobal: true, load: [() => ({ app: config })] }),
      ],
      providers: [{ provide: APP_CONFIG, useValue: config }],
      exports: [APP_CONFIG],
    };
  }
}
