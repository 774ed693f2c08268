import { Injectable, Logger } from '@nestjs/common';
import type { RewardsEnvironment } from '../config/app-config';

export interface ActivatedConnection {
  id: string;
  tenantId: string;
  environment: RewardsEnvironment;
}

type ActivationHook = (connection: ActivatedConnection) => Promise<void>;

/**
 * Work other modules want done once a connection is active, before the browser is sent back (the account's webhook
 * registration, so no event of the first send is missed). A failing hook never fails the connect: it retries itself.
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
