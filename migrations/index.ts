import { TenantsAndApiKeys1700000000000 } from './1700000000000-tenants-and-api-keys';
import { ConnectionsAndVault1700000001000 } from './1700000001000-connections-and-vault';
import { FieldsCacheAndDispatches1700000002000 } from './1700000002000-fields-cache-and-dispatches';
import { Ops1700000003000 } from './1700000003000-ops';
import { PerRewardOrders1700000004000 } from './1700000004000-per-reward-orders';
import { DispatchCancelAndHousekeeping1700000005000 } from './1700000005000-dispatch-cancel-and-housekeeping';
import { OpsListIndex1700000006000 } from './1700000006000-ops-list-index';
import { VaultCanary1700000007000 } from './1700000007000-vault-canary';
import { AuthThrottle1700000008000 } from './1700000008000-auth-throttle';
import { SandboxState1700000009000 } from './1700000009000-sandbox-state';
import { PacingAndBatches1700000010000 } from './1700000010000-pacing-and-batches';
import { DeliveryStatus1700000011000 } from './1700000011000-delivery-status';
import { DeliveryWebhooks1700000012000 } from './1700000012000-delivery-webhooks';
import { TenantWebhooks1700000013000 } from './1700000013000-tenant-webhooks';
import { Dashboard1700000014000 } from './1700000014000-dashboard';
import { DispatchOpenIndexes1700000015000 } from './1700000015000-dispatch-open-indexes';
import { ApiKeyScopes1700000016000 } from './1700000016000-api-key-scopes';
import { AuditEvents1700000016100 } from './1700000016100-audit-events';
import { ConnectionOrganization1700000017400 } from './1700000017400-connection-organization';
import { TenantEventsInCode1700000017500 } from './1700000017500-tenant-events-in-code';
import { Retention1700000018000 } from './1700000018000-retention';
import { ConnectionActivity1700000018100 } from './1700000018100-connection-activity';
import { KeyedRecords1700000018200 } from './1700000018200-keyed-records';

/** Every migration, in order. Listed explicitly so ts-jest, ts-node and the compiled build all find them. */
export const MIGRATIONS = [
  TenantsAndApiKeys1700000000000,
  ConnectionsAndVault1700000001000,
  FieldsCacheAndDispatches1700000002000,
  Ops1700000003000,
  PerRewardOrders1700000004000,
  DispatchCancelAndHousekeeping1700000005000,
  OpsListIndex1700000006000,
  VaultCanary1700000007000,
  AuthThrottle1700000008000,
  SandboxState1700000009000,
  PacingAndBatches1700000010000,
  DeliveryStatus1700000011000,
  DeliveryWebhooks1700000012000,
  TenantWebhooks1700000013000,
  Dashboard1700000014000,
  DispatchOpenIndexes1700000015000,
  ApiKeyScopes1700000016000,
  AuditEvents1700000016100,
  ConnectionOrganization1700000017400,
  TenantEventsInCode1700000017500,
  Retention1700000018000,
  ConnectionActivity1700000018100,
  KeyedRecords1700000018200,
];
