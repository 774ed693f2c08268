import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';

/**
 * SSRF guard: a tenant's webhook URL (or a name whose DNS answer changes later) must not make the gateway call its own
 * network (loopback, private ranges, cloud metadata). Checked at registration and at every delivery, on the very
 * addresses the connection then uses (`pinnedLookup`): no DNS rebinding between the check and the connect.
 */
const blocked = new BlockList();
// IPv4
blocked.addSubnet('0.0.0.0', 8, 'ipv4'); // "this network", includes the unspecified 0.0.0.0
blocked.addSubnet('10.0.0.0', 8, 'ipv4'); // RFC 1918
blocked.addSubnet('100.64.0.0', 10, 'ipv4'); // CGNAT, RFC 6598
blocked.addSubnet('127.0.0.0', 8, 'ipv4'); // loopback
blocked.addSubnet('169.254.0.0', 16, 'ipv4'); // link-local (cloud metadata: 169.254.169.254)
blocked.addSubnet('172.16.0.0', 12, 'ipv4'); // RFC 1918
blocked.addSubnet('192.0.0.0', 24, 'ipv4'); // IETF protocol assignments
blocked.addSubnet('192.168.0.0', 16, 'ipv4'); // RFC 1918
blocked.addSubnet('198.18.0.0', 15, 'ipv4'); // benchmarking
blocked.addSubnet('224.0.0.0', 4, 'ipv4'); // multicast
blocked.addSubnet('240.0.0.0', 4, 'ipv4'); // reserved, and the broadcast 255.255.255.255
// IPv6
blocked.addAddress('::', 'ipv6'); // unspecified
blocked.addAddress('::1', 'ipv6'); // loopback
blocked.addSubnet('fc00::', 7, 'ipv6'); // unique local
blocked.addSubnet('fe80::', 10, 'ipv6'); // link-local
blocked.addSubnet('fec0::', 10, 'ipv6'); // site-local (deprecated)
blocked.addSubnet('ff00::', 8, 'ipv6'); // multicast

/** The IPv4 address an IPv6 address carries (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`), if any. */
function embeddedIpv4(address: string): string | null {
  const lower = address.toLowerCase();
  const mapped = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return mapped[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1], 16);
    const lo = parseInt(hex[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return null;
}

/** True when an IP address (v4 or v6) is in a refused range: loopback, private, link-local, CGNAT, multicast, … */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIpv4(address);
    if (v4 !== null) return blocked.check(v4, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true; // not an IP address at all: refuse rather than guess
}

/** Raised when a target is refused; its `code` lets the sender tell it from a network error. */
export class ForbiddenTargetError extends Error {
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
