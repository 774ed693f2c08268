import { TenantsAndApiKeys1700000000000 } from './1700000000000-tenants-and-api-keys';
import { ConnectionsAndVault1700000001000 } from './1700000001000-connections-and-vault';
import { FieldsCacheAndDispatches1700000002000 } from './1700000002000-fields-cache-and-dispatches';
import { Ops1700000003000 } from './1700000003000-ops';
import { PerRewardOrders1700000004000 } from './1700000004000-per-reward-orders';

/** Every migration, in order. Listed explicitly so ts-jest, ts-node and the compiled build all find them. */
export const MIGRATIONS = [TenantsAndApiKeys1700000000000, ConnectionsAndVault1700000001000, FieldsCacheAndDispatches1700000002000, Ops1700000003000, PerRewardOrders1700000004000];
