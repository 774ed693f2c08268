import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'tenants' })
export class TenantEntity {
  /** A slug chosen by the platform, e.g. `acme-corp`. */
  @PrimaryColumn({ type: 'varchar', length: 63 })
  id: string;

  @Column({ type: 'varchar', length: 200 })
  name: string;

  /** Allow-list for connect-session `return_url`s. */
  @Column({ name: 'return_urls', type: 'text', array: true, default: () => "'{}'" })
  returnUrls: string[];

  @Column({ name: 'default_funding_source_id', type: 'varchar', length: 200, nullable: true })
  defaultFundingSourceId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
