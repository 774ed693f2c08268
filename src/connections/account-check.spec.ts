import { accountVerdict } from './account-check.service';

const demo = { id: 'ORGDEMO00001', name: 'Demo Rewards Co' };
const other = { id: 'ORGOTHER0001', name: 'Other Test Account' };

describe('accountVerdict', () => {
  it('accepts any organization when the tenant has no live connection (never connected, or disconnected first)', () => {
    expect(accountVerdict(null, other)).toBe('accept');
    expect(accountVerdict(null, null)).toBe('accept');
  });

  it('accepts the same organization again, whatever the live connection’s status', () => {
    for (const status of ['active', 'error', 'needs_reauth'])
      expect(accountVerdict({ status, organization_id: demo.id }, demo)).toBe('accept');
  });

  it('refuses another organization, whatever the live connection’s status', () => {
    for (const status of ['active', 'error', 'needs_reauth'])
      expect(accountVerdict({ status, organization_id: demo.id }, other)).toBe('mismatch');
  });

  it('refuses, retryably, a grant whose organization the service did not name', () => {
    expect(accountVerdict({ status: 'active', organization_id: demo.id }, null)).toBe('unverifiable');
    expect(accountVerdict({ status: 'needs_reauth', organization_id: null }, null)).toBe('unverifiable');
  });

  it('accepts over a live connection of unknown organization only when it needs a new consent anyway', () => {
    expect(accountVerdict({ status: 'needs_reauth', organization_id: null }, other)).toBe('accept');
    expect(accountVerdict({ status: 'active', organization_id: null }, other)).toBe('unverifiable');
    expect(accountVerdict({ status: 'error', organization_id: null }, other)).toBe('unverifiable');
  });
});
