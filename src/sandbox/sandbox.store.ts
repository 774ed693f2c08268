import type { INestApplicationContext } from '@nestjs/common';
import { Database } from '../database/database';
import type { Sql } from '../database/sql';
import type { SandboxPersistence } from './sandbox.persistence';

/**
 * The only writer of `sandbox_state`: the mounted sandbox's whole state as one jsonb row (id = 1), replaced on
 * each save. Used only when the sandbox is mounted in the gateway.
 */
export class SandboxStore implements SandboxPersistence {
  constructor(private readonly sql: Sql) {}

  /** On the gateway's main pool. */
  static forApp(app: INestApplicationContext): SandboxStore {
    return new SandboxStore(app.get(Database).main);
  }

  async load(): Promise<unknown> {
    const { rows } = await this.sql.query<{ state: unknown }>(`SELECT state FROM sandbox_state WHERE id = 1`);
    return rows[0]?.state ?? null;
  }

  async save(snapshotJson: string): Promise<void> {
    await this.sql.query(
      `INSERT INTO sandbox_state (id, state, saved_at) VALUES (1, $1::jsonb, now())
       ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, saved_at = EXCLUDED.saved_at`,
      [snapshotJson],
    );
  }
}
