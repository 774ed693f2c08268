import { Injectable, Logger } from '@nestjs/common';
import type { RewardsEnvironment } from '../config/app-config';

/** A connection that has just become active (its grant stored, the transaction committed). */
export interface ActivatedConnection {
  id: string;
  tenantId: string;
  environment: RewardsEnvironment;
}

export type ActivationHook = (connection: ActivatedConnection) => Promise<void>;

/**
 * Work other modules want done as soon as a connection becomes active — after the connect (or reconnect)
 * transaction commits and **before** the browser is sent back to the platform (the delivery-webhooks module
 * registers the account's webhook here, so no event of the first send is missed). A hook that fails never fails the
 * connect: it is logged here; a hook records what it needs to retry on its own.
 */
@Injectable()
export class ConnectionActivationHooks {
  private readonly logger = new Logger(ConnectionActivationHooks.name);
  private readonly hooks: { name: string; run: ActivationHook }[] = [];

  register(name: string, run: ActivationHook): void {
    this.hooks.push({ name, run });
  }

  async run(connection: ActivatedConnection): Promise<void> {
    for (const hook of this.hooks) {
      try {
        await hook.run(connection);
      } catch (error) {
        this.logger.warn(
          {
            connectionId: connection.id,
            hook: hook.name,
            err: error instanceof Error ? error.message : String(error),
          },
          'a connection activation hook failed (the connection is active; the hook retries on its own)',
        );
      }
    }
  }
}
