import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyRequest } from 'fastify';
import typeis from 'type-is';
import { CommonError } from '../common/app-error';
import { closeAfterAnswer } from '../common/close-after-answer';
import { readCapped, refuseCompressed } from '../common/json-body';
import type { RewardsConfig, RewardsEnvironment } from '../config/app-config';
import { REWARDS_ENVIRONMENTS } from '../config/app-config';
import { WebhookSignatureInvalidError } from './delivery-webhooks.errors';
import { SIGNATURE_HEADER, parseSignature } from './webhook-signature';

/** A delivery webhook is a few hundred bytes; anything above this is refused before more is read. */
const MAX_WEBHOOK_BODY_BYTES = 64 * 1024;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The request as the controller sees it: the raw body (the bytes the signature is over). */
export type WebhookRequest = FastifyRequest & { body?: Buffer };

/**
 * The body reader of `POST /webhooks/rewards/{environment}` (mounted for that path only; nothing else there parses
 * a body). The route takes no API key, so everything an unauthenticated sender can make it do stays cheap, and is
 * refused in this order before a byte of the body is read: an environment this gateway does not serve → 404; no
 * well-formed `Tremendous-Webhook-Signature` → 401; `Content-Encoding` other than identity, or a body that is not
 * `application/json` → 415; a declared length over 64 KiB → 413 (each with `Connection: close`). Then the body is
 * read as raw bytes, and reading stops at 64 KiB (413). The signature itself is checked by the controller.
 */
export function deliveryWebhookBody(
  environments: RewardsConfig,
  onBadSignature: () => void,
): (req: IncomingMessage, res: ServerResponse) => Promise<Buffer | undefined> {
  return async (req, res) => {
    if (req.method !== 'POST') return undefined;
    try {
      servedEnvironment(environments, /^\/webhooks\/rewards\/([a-z]+)\/?(?:\?|$)/i.exec(req.url ?? '')?.[1]);
      if (!parseSignature(req.headers[SIGNATURE_HEADER])) {
        onBadSignature();
        throw new WebhookSignatureInvalidError();
      }
      refuseCompressed(req, 'Compressed webhook bodies are not accepted.');
      const length = req.headers['content-length'];
      if ((length === undefined || length === '0') && req.headers['transfer-encoding'] === undefined)
        throw new CommonError(400, 'invalid_json', 'The webhook has no body.', [
          { field: 'body', reason: 'empty' },
        ]);
      if (!typeis(req, ['application/json'])) throw notJsonType(req.headers['content-type']);
      return await readCapped(req, res, MAX_WEBHOOK_BODY_BYTES, tooLarge);
    } catch (error) {
      closeAfterAnswer(req, res); // do not read what will be refused
      throw error;
    }
  };
}

/** `name` when it is an environment this gateway serves; else our 404. */
export function servedEnvironment(environments: RewardsConfig, name: string | undefined): RewardsEnvironment {
  const environment = name as RewardsEnvironment;
  if (REWARDS_ENVIRONMENTS.includes(environment) && environments[environment]) return environment;
  throw notServed();
}

/** UTF-8 JSON, or our 400 (before any key is looked up: junk costs no query). */
export function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(utf8.decode(raw));
  } catch {
    throw notJson();
  }
}

export const notServed = () =>
  new CommonError(404, 'not_found', 'No rewards environment of that name sends webhooks here.');
export const notJson = () =>
  new CommonError(400, 'invalid_json', 'The webhook body is not valid JSON.', [
    { field: 'body', reason: 'not valid UTF-8 JSON' },
  ]);
export const tooLarge = () =>
  new CommonError(
    413,
    'payload_too_large',
    `The webhook body is larger than ${MAX_WEBHOOK_BODY_BYTES / 1024} KiB.`,
  );
export const notJsonType = (type: string | undefined) =>
  new CommonError(
    415,
    'unsupported_media_type',
    'Webhook bodies are JSON ("Content-Type: application/json").',
    [{ field: 'Content-Type', reason: `${type ?? 'missing'} is not application/json` }],
  );
