import type { UpstreamOrganization } from '../rewards-api/rewards-api.types';

/** What a connect callback does with a new grant, from the organization it belongs to. */
export type AccountVerdict =
  /** Store it: a first connection, the same organization again, or nothing to compare with (see below). */
  | 'accept'
  /** Refuse it: another organization than the live connection's. */
  | 'mismatch'
  /** Refuse it for now (the admin can retry): there is a live connection but the comparison cannot be made. */
  | 'unverifiable';

/**
 * The rule that keeps a connection on one rewards organization (its orders' `external_id`s and its history are the
 * account's): a live connection (active, error or needs_reauth) is replaced only by a grant of its own organization.
 * A tenant with no live connection (never connected, or disconnected first) may connect any organization.
 *
 * When an organization is unknown: the new grant's (the service did not say) refuses rather than accepts blindly;
 * the live connection's (made before the gateway recorded it, and its grant could not tell either) is accepted only
 * when the connection needs a new consent anyway — its grant is dead, so retrying can never tell, and it sends nothing
 * until replaced — and refused otherwise (a working grant is asked again on the next attempt).
 */
export function accountVerdict(
  live: { status: string; organization_id: string | null } | null,
  granted: UpstreamOrganization | null,
): AccountVerdict {
  if (!live) return 'accept';
  if (!granted) return 'unverifiable';
  if (live.organization_id === null) return live.status === 'needs_reauth' ? 'accept' : 'unverifiable';
  return live.organization_id === granted.id ? 'accept' : 'mismatch';
}
