import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';

/**
 * SSRF guard: a tenant's webhook URL (or a name whose DNS answer changes later) must not make the gateway call its own
 * network (loopback, private ranges, cloud metadata). Checked at registration and at every delivery, on the very
 * addresses the connection then uses (`pinnedLookup`): no DNS rebinding between the check and the connect.
 */
const blocked = new BlockList();
/**
 * [network, prefix]: refused as IPv4, as IPv4-mapped IPv6 (`::ffff:a.b.c.d`, which BlockList matches by itself) and
 * as NAT64 (`64:ff9b::/96`).
 */
const IPV4: [string, number][] = [
  ['0.0.0.0', 8], // "this network", includes the unspecified 0.0.0.0
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // CGNAT, RFC 6598
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata: 169.254.169.254)
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast 255.255.255.255
];
for (const [network, prefix] of IPV4) {
  blocked.addSubnet(network, prefix, 'ipv4');
  blocked.addSubnet(`64:ff9b::${network}`, 96 + prefix, 'ipv6');
}
blocked.addAddress('::', 'ipv6'); // unspecified
blocked.addAddress('::1', 'ipv6'); // loopback
blocked.addSubnet('fc00::', 7, 'ipv6'); // unique local
blocked.addSubnet('fe80::', 10, 'ipv6'); // link-local
blocked.addSubnet('fec0::', 10, 'ipv6'); // site-local (deprecated)
blocked.addSubnet('ff00::', 8, 'ipv6'); // multicast

/** True when an IP address (v4 or v6) is in a refused range; anything that is not an IP address is refused too. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  return family === 0 || blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** Raised when a target is refused; its `code` lets the sender tell it from a network error. */
class ForbiddenTargetError extends Error {
  readonly code = 'ERR_WEBHOOK_TARGET_FORBIDDEN';
  constructor(
    readonly host: string,
    readonly address: string | null,
  ) {
    super(
      address
        ? `the target ${host} resolves to ${address}, a loopback, private, link-local or otherwise internal address; refused`
        : `the target ${host} is a loopback, private, link-local or otherwise internal address; refused`,
    );
    this.name = 'ForbiddenTargetError';
  }
}

export function isForbiddenTargetError(error: unknown): error is ForbiddenTargetError {
  for (let e = error as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (e instanceof ForbiddenTargetError || e.code === 'ERR_WEBHOOK_TARGET_FORBIDDEN') return true;
    e = e.cause as typeof e;
  }
  return false;
}

/** The URL's host without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Names that are loopback by definition (RFC 6761), whatever a resolver says. */
function isLocalName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

/**
 * Resolves `host` (all addresses, as the connection would) and refuses it when any address is internal. An IP literal
 * is checked as it is. Returns the checked addresses: connect to these, not to a second resolution.
 */
export async function resolveChecked(host: string, allowPrivate: boolean): Promise<LookupAddress[]> {
  const family = isIP(host);
  if (family) {
    if (!allowPrivate && isForbiddenAddress(host)) throw new ForbiddenTargetError(host, null);
    return [{ address: host, family }];
  }
  if (!allowPrivate && isLocalName(host)) throw new ForbiddenTargetError(host, null);
  const addresses = await dnsLookup(host, { all: true, verbatim: true });
  if (addresses.length === 0)
    throw Object.assign(new Error(`${host} did not resolve`), { code: 'ENOTFOUND' });
  if (!allowPrivate) {
    const bad = addresses.find((a) => isForbiddenAddress(a.address));
    if (bad) throw new ForbiddenTargetError(host, bad.address);
  }
  return addresses;
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for undici's `connect` options: hands the socket exactly the addresses `resolveChecked` checked (all of
 * them when Node races address families). IP literals never reach a lookup: check them before connecting.
 */
export function pinnedLookup(allowPrivate: () => boolean) {
  return (
    hostname: string,
    options: { all?: boolean; family?: number | string },
    callback: LookupCallback,
  ) => {
    resolveChecked(hostname, allowPrivate()).then(
      (addresses) => {
        const wanted =
          Number(options.family) === 4 || Number(options.family) === 6 ? Number(options.family) : 0;
        const usable = wanted ? addresses.filter((a) => a.family === wanted) : addresses;
        if (usable.length === 0) {
          callback(
            Object.assign(new Error(`${hostname}: no IPv${wanted} address`), { code: 'ENOTFOUND' }),
            '',
          );
        } else if (options.all) callback(null, usable);
        else callback(null, usable[0].address, usable[0].family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}
