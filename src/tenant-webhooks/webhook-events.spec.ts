import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  type TenantEvent,
  type WebhookEventType,
  WEBHOOK_EVENTS,
  WEBHOOK_EVENT_TYPES,
  connectionNeedsReauth,
  connectionRecovered,
  dispatchCompleted,
  rewardDelivered,
  rewardDeliveryFailed,
  rewardSent,
} from './webhook-events';

const at = new Date('2026-11-23T17:23:05.629Z');
const dispatch = {
  id: '5b0c7f3e-1d2a-4c1b-9e0f-2a3b4c5d6e7f',
  tenant_id: 'acme',
  environment: 'sandbox' as const,
  idempotency_key: 'payroll-2026-11-ada',
};
const reward = {
  position: 0,
  external_id: '5b0c7f3e-1d2a-4c1b-9e0f-2a3b4c5d6e7f-r0',
  upstream_reward_id: '4SBVBQGUZOGR',
  upstream_order_id: 'SFZCMH4NMC5X',
  delivery_method: 'EMAIL',
};
const delivery = {
  ...reward,
  status: 'sent' as const,
  delivery_status: 'FAILED',
  delivery_reason: 'mailbox does not exist',
  delivery_event_at: new Date('2026-11-23T17:25:00.000Z'),
};
const connection = {
  id: '0c9d8e7f-6a5b-4c3d-2e1f-0a9b8c7d6e5f',
  tenant_id: 'acme',
  environment: 'sandbox' as const,
};

/**
 * One event of each type, built from fixed facts, and its payload exactly as platforms receive it today: the fields,
 * their values and their null-ness. A change here is a change of the public contract.
 */
const PINNED: Record<WebhookEventType, { event: TenantEvent; payload: unknown }> = {
  'dispatch.completed': {
    event: dispatchCompleted(
      { ...dispatch, external_reference: 'payroll-7', created_at: new Date('2026-11-23T17:23:04.001Z') },
      {
        status: 'partially_failed',
        counts: { pending: 0, sending: 0, sent: 1, pending_approval: 0, failed: 1, cancelled: 0 },
        error_code: null,
      },
      at,
    ),
    payload: {
      type: 'dispatch.completed',
      timestamp: '2026-11-23T17:23:05.629Z',
      data: {
        tenant_id: 'acme',
        dispatch_id: dispatch.id,
        environment: 'sandbox',
        idempotency_key: 'payroll-2026-11-ada',
        external_reference: 'payroll-7',
        status: 'partially_failed',
        counts: { pending: 0, sending: 0, sent: 1, pending_approval: 0, failed: 1, cancelled: 0 },
        error_code: null,
        created_at: '2026-11-23T17:23:04.001Z',
      },
    },
  },
  'reward.sent': {
    event: rewardSent(
      dispatch,
      { ...reward, upstream_order_status: 'EXECUTED', sent_at: new Date('2026-11-23T17:23:05.601Z') },
      at,
    ),
    payload: {
      type: 'reward.sent',
      timestamp: '2026-11-23T17:23:05.629Z',
      data: {
        tenant_id: 'acme',
        dispatch_id: dispatch.id,
        environment: 'sandbox',
        idempotency_key: 'payroll-2026-11-ada',
        position: 0,
        external_id: reward.external_id,
        status: 'sent',
        reward_id: '4SBVBQGUZOGR',
        upstream_order_id: 'SFZCMH4NMC5X',
        upstream_order_status: 'EXECUTED',
        delivery_method: 'EMAIL',
        sent_at: '2026-11-23T17:23:05.601Z',
      },
    },
  },
  'reward.delivered': {
    event: rewardDelivered(
      dispatch,
      { ...delivery, delivery_status: 'SUCCEEDED', delivery_reason: null },
      at,
    ),
    payload: {
      type: 'reward.delivered',
      timestamp: '2026-11-23T17:23:05.629Z',
      data: {
        tenant_id: 'acme',
        dispatch_id: dispatch.id,
        environment: 'sandbox',
        idempotency_key: 'payroll-2026-11-ada',
        position: 0,
        external_id: reward.external_id,
        status: 'sent',
        reward_id: '4SBVBQGUZOGR',
        upstream_order_id: 'SFZCMH4NMC5X',
        delivery_method: 'EMAIL',
        delivery_state: 'delivered',
        delivery_status: 'SUCCEEDED',
        delivery_reason: null,
        delivery_event_at: '2026-11-23T17:25:00.000Z',
      },
    },
  },
  'reward.delivery_failed': {
    event: rewardDeliveryFailed(dispatch, delivery, at),
    payload: {
      type: 'reward.delivery_failed',
      timestamp: '2026-11-23T17:23:05.629Z',
      data: {
        tenant_id: 'acme',
        dispatch_id: dispatch.id,
        environment: 'sandbox',
        idempotency_key: 'payroll-2026-11-ada',
        position: 0,
        external_id: reward.external_id,
        status: 'sent',
        reward_id: '4SBVBQGUZOGR',
        upstream_order_id: 'SFZCMH4NMC5X',
        delivery_method: 'EMAIL',
        delivery_state: 'delivery_failed',
        delivery_status: 'FAILED',
        delivery_reason: 'mailbox does not exist',
        delivery_event_at: '2026-11-23T17:25:00.000Z',
      },
    },
  },
  'connection.needs_reauth': {
    event: connectionNeedsReauth(
      connection,
      {
        previous_status: 'active',
        reason: 'invalid_grant',
        message:
          'The rewards service rejected the refresh token (used or revoked); the tenant must connect again.',
      },
      at,
    ),
    payload: {
      type: 'connection.needs_reauth',
      timestamp: '2026-11-23T17:23:05.629Z',
      data: {
        tenant_id: 'acme',
        connection_id: connection.id,
        environment: 'sandbox',
        status: 'needs_reauth',
        previous_status: 'active',
        reason: 'invalid_grant',
        message:
          'The rewards service rejected the refresh token (used or revoked); the tenant must connect again.',
      },
    },
  },
  'connection.recovered': {
    event: connectionRecovered(connection, 'f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9', at),
    payload: {
      type: 'connection.recovered',
      timestamp: '2026-11-23T17:23:05.629Z',
      data: {
        tenant_id: 'acme',
        connection_id: connection.id,
        environment: 'sandbox',
        status: 'active',
        previous_status: 'needs_reauth',
        replaced_connection_id: 'f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9',
      },
    },
  },
};

/** The payload as stored and delivered: JSON (a key whose value is undefined would be dropped, a Date turned into a string). */
const asDelivered = (event: TenantEvent) => JSON.parse(JSON.stringify(event)) as unknown;

describe('tenant events: the public contract', () => {
  it.each(WEBHOOK_EVENT_TYPES)('builds %s with the fields and values platforms receive', (type) => {
    const { event, payload } = PINNED[type];
    expect(event.type).toBe(type);
    expect(asDelivered(event)).toStrictEqual(payload);
  });

  it('lists every event type once, in the order the API lists an endpoint’s events', () => {
    expect(WEBHOOK_EVENT_TYPES).toEqual([
      'dispatch.completed',
      'reward.sent',
      'reward.delivered',
      'reward.delivery_failed',
      'connection.needs_reauth',
      'connection.recovered',
    ]);
  });

  it('says when a reward was sent even when the store has no time for it (the time of the change)', () => {
    const event = rewardSent(dispatch, { ...reward, upstream_order_status: null, sent_at: null }, at);
    expect(event.data.sent_at).toBe('2026-11-23T17:23:05.629Z');
    expect(event.data.upstream_order_status).toBeNull();
  });

  it('copies the counts (a later change of the caller’s object does not change the event)', () => {
    const counts = { pending: 0, sending: 0, sent: 1, pending_approval: 0, failed: 0, cancelled: 0 };
    const event = dispatchCompleted(
      { ...dispatch, external_reference: null, created_at: at },
      { status: 'sent', counts, error_code: null },
      at,
    );
    counts.sent = 5;
    expect(event.data.counts.sent).toBe(1);
    expect(event.data.external_reference).toBeNull();
  });

  it('never carries a secret, a token or a redemption link', () => {
    for (const type of WEBHOOK_EVENT_TYPES) {
      const keys = Object.keys(PINNED[type].event.data);
      expect({
        type,
        suspicious: keys.filter((k) => /secret|token|link|password|key_enc|_enc$/.test(k)),
      }).toEqual({
        type,
        suspicious: [],
      });
    }
  });
});

describe('tenant events: docs/api.md', () => {
  const api = readFileSync(path.join(__dirname, '..', '..', 'docs', 'api.md'), 'utf8');
  const section = api.slice(
    api.indexOf('\n### Events\n'),
    api.indexOf('\n### Delivery, retries and disabling\n'),
  );

  it('has the event table of the code: each event once, with when it happens', () => {
    expect(section.length).toBeGreaterThan(100);
    const rows = [...section.matchAll(/^\| `([a-z_.]+)` \| (.+) \|$/gm)].map(([, type, when]) => [
      type,
      when,
    ]);
    expect(rows).toEqual(WEBHOOK_EVENT_TYPES.map((type) => [type, WEBHOOK_EVENTS[type]]));
  });

  it('lists each event’s data fields as the builders produce them (tenant_id in every one)', () => {
    const listed = new Map<string, string[]>();
    for (const [, types, fields] of section.matchAll(
      /^- ((?:`[a-z_.]+`(?:, )?)+): ([^]*?)[;.]\n(?=- |\n)/gm,
    )) {
      // Backticked words outside parentheses (which give examples and values).
      const names = [...fields.replace(/\([^()]*\)/g, '').matchAll(/`([a-z_]+)`/g)].map((m) => m[1]);
      for (const [, type] of types.matchAll(/`([a-z_.]+)`/g)) listed.set(type, names);
    }
    for (const type of WEBHOOK_EVENT_TYPES) {
      const fields = Object.keys(PINNED[type].event.data).filter((k) => k !== 'tenant_id');
      expect({ type, fields: listed.get(type) }).toEqual({ type, fields });
    }
    for (const type of WEBHOOK_EVENT_TYPES) expect(PINNED[type].event.data).toHaveProperty('tenant_id');
  });

  it('shows an example with the fields of its event', () => {
    const example = /```json\n([^]*?)\n```/.exec(section)?.[1];
    const parsed = JSON.parse(example ?? '{}') as TenantEvent;
    expect(Object.keys(parsed.data)).toEqual(Object.keys(PINNED[parsed.type].event.data));
  });
});
