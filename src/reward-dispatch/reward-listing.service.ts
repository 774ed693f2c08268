import { HttpStatus, Injectable } from '@nestjs/common';
import { type ErrorDetail, ValidationFailedError } from '../common/app-error';
import { FieldsError } from '../fields-cache/fields-cache.errors';
import { ConnectionsService } from '../connections/connections.service';
import { FieldsCacheService } from '../fields-cache/fields-cache.service';
import { RewardsApiError } from '../rewards-api/rewards-api.errors';
import { RewardsApi } from '../token-vault/rewards-api.service';
import { upstreamAppError } from '../rewards-api/rewards-api.errors';

const RESERVED = new Set(['environment', 'offset', 'limit']);

/**
 * A time of the rewards service (`2026-11-22 10:15:30 UTC`, or ISO with an offset or none: UTC) as ISO 8601 UTC with
 * milliseconds; a value that does not parse is passed on as it is.
 */
function isoUtc(text: string): string {
  const normalised = text
    .trim()
    .replace(/^(\d{4}-\d{2}-\d{2}) (?=\d)/, '$1T')
    .replace(/\s*UTC$/i, 'Z')
    .replace(/T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/, '$&Z'); // no zone: the service's times are UTC
  const ms = Date.parse(normalised);
  return Number.isNaN(ms) ? text : new Date(ms).toISOString();
}

/** The upstream reward with every time (a string under a key ending in `_at`, at any depth) as ISO 8601 UTC. */
function isoTimes<T>(value: T, depth = 0): T {
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v: unknown) => isoTimes(v, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>))
    out[key] = typeof v === 'string' && /(^|_)at$/.test(key) ? isoUtc(v) : isoTimes(v, depth + 1);
  return out as T;
}

/** `GET /v1/tenants/{tenant}/rewards?<label>=<value>`: the upstream's filtered list, labels checked first. */
@Injectable()
export class RewardListingService {
  constructor(
    private readonly connections: ConnectionsService,
    private readonly fields: FieldsCacheService,
    private readonly rewardsApi: RewardsApi,
  ) {}

  async list(tenantId: string, query: Record<string, unknown>) {
    const problems: ErrorDetail[] = [];
    const single = (name: string): string | undefined => {
      const v = query[name];
      if (v === undefined) return undefined;
      if (typeof v !== 'string') {
        problems.push({ field: name, reason: 'give the parameter once, as a plain value' });
        return undefined;
      }
      return v;
    };
    const environment = single('environment');
    if (environment !== undefined && environment !== 'sandbox' && environment !== 'production')
      problems.push({ field: 'environment', reason: 'must be sandbox or production' });
    const offset = single('offset') ?? '0';
    const limit = single('limit') ?? '50';
    if (!/^\d{1,7}$/.test(offset))
      problems.push({ field: 'offset', reason: 'must be a whole number from 0' });
    if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > 100)
      problems.push({ field: 'limit', reason: 'must be a whole number from 1 to 100' });
    const filters: [string, string][] = [];
    for (const name of Object.keys(query)) {
      if (RESERVED.has(name)) continue;
      const value = single(name);
      if (value !== undefined) filters.push([name, value]);
    }
    if (problems.length) throw new ValidationFailedError(problems, 'The query is invalid; see details.');

    const connection = await this.connections.liveConnection(tenantId, environment);
    let snapshot = await this.fields.get(connection.id);
    const unknown = () => filters.filter(([label]) => !snapshot.fields.some((f) => f.label === label));
    if (unknown().length) snapshot = await this.fields.forceReload(connection.id);
    const stillUnknown = unknown();
    if (stillUnknown.length) {
      throw new FieldsError(
        HttpStatus.UNPROCESSABLE_ENTITY,
        'unknown_custom_field',
        'Filter by custom field labels of the rewards account; see details.',
        stillUnknown.map(([label]) => ({
          field: label,
          reason: `unknown custom field label "${label}"`,
          known_labels: snapshot.fields.map((f) => f.label),
        })),
      );
    }
    const params = new URLSearchParams([...filters, ['offset', offset], ['limit', limit]]);
    try {
      const page = await this.rewardsApi.forConnection(connection.id).listRewards(params);
      return { ...page, rewards: page.rewards.map(isoTimes), offset: Number(offset), limit: Number(limit) };
    } catch (error) {
      if (error instanceof RewardsApiError)
        throw upstreamAppError(error, 'the listing', HttpStatus.BAD_GATEWAY);
      throw error;
    }
  }
}
