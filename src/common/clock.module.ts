import type { DynamicModule } from '@nestjs/common';
import { Global, Module } from '@nestjs/common';
import { Clock, systemClock } from './clock';

/**
 * Provides the process's `Clock` to every module (inject `Clock`): the system clock, or the one a test passes to
 * `createApp` to move time instead of waiting (key expiry, audit retention).
 */
@Global()
@Module({})
export class ClockModule {
  static forRoot(clock: Clock = systemClock): DynamicModule {
    return { module: ClockModule, providers: [{ provide: Clock, useValue: clock }], exports: [Clock] };
  }
}
