import type { UpstreamOrganization } from '../rewards-api/rewards-api.types';

/**
 * What a connect callback does with a new grant: a live connection (active, error or needs_reauth) is replaced only
 * by a grant of its own organization (its orders and history are that account's); with none, any is accepted.
 * `unverifiable` (refused for now, the admin can retry): the grant's organization is unknown, or the live one's is
 * while its grant still works; a needs_reauth connection of unknown organization can never tell, so it is accepted.
 */
export function accountVerdict(
  live: { status: string; organization_id: string | null } | null,
  granted: UpstreamOrganization | null,
): 'accept' | 'mismatch' | 'unverifiable' {
  if (!live) return 'accept';
  if (!granted) return 'unverifiable';
  if (live.organization_id === null) return live.status === 'needs_reauth' ? 'accept' : 'unverifiable';
  return live.organization_id === granted.id ? 'accept' : 'mismatch';
}
