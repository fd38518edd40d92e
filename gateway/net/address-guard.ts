/**
 * Where the forwarder may connect. Public unicast only: loopback, private,
 * carrier-grade NAT, link-local (cloud metadata at 169.254.169.254 / fd00:ec2::254), multicast,
 * documentation, IPv4-mapped/compatible IPv6 and NAT64 ranges are refused. The check runs on
 * the literal host before anything else and on every address DNS returns, inside the socket's
 * own lookup, so the address checked is the address connected to (no DNS-rebinding gap).
 */
import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { canonicalUrlHost } from '../../service-kit/host-name.js';

// Two lists: one BlockList would also match IPv4 addresses against the IPv6 mapped ranges.
const blocked4 = new BlockList();
const blocked6 = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked4.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 96], // unspecified, loopback, IPv4-compatible
  ['::ffff:0:0', 96], // IPv4-mapped: would reach the v4 address inside
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48], // NAT64
  ['100::', 64],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['2001::', 32], // discard, docs, 6to4, Teredo
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  blocked6.addSubnet(net, bits, 'ipv6');

/**
 * Options of the guard: everything private refused unless `allowPrivate`; `allowHosts` lists exact `host:port`
 * exceptions.
 */
export interface TargetPolicy {
  allowPrivate: boolean;
  allowHosts?: string[];
}

/** True when `address` (an IP literal) is a public unicast address. */
export function isPublicAddress(address: string): boolean {
  const fam = isIP(address);
  if (fam === 4) return !blocked4.check(address, 'ipv4');
  if (fam === 6) {
    const a = address.toLowerCase().split('%')[0]!;
    // BlockList does not always match mapped forms written with dotted quads.
    if (/^(::ffff:|::)(\d+\.){3}\d+$/.test(a) || a.startsWith('::ffff:')) return false;
    return !blocked6.check(a, 'ipv6');
  }
  return false;
}

export class TargetRefused extends Error {
  readonly code = 'target_not_allowed';
  constructor(message: string) {
    super(message);
    this.name = 'TargetRefused';
  }
}

/** The host as URL gives it, without IPv6 brackets. */
export function bareHost(url: URL): string {
  const h = url.hostname.toLowerCase();
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

const portOf = (url: URL) => url.port || (url.protocol === 'https:' ? '443' : '80');

/** True when the URL's host:port is one of the configured exceptions. */
export function isExcepted(url: URL, policy: TargetPolicy): boolean {
  if (!policy.allowHosts?.length) return false;
  const key = `${bareHost(url)}:${portOf(url)}`;
  return policy.allowHosts.some((h) => h.toLowerCase() === key);
}

/**
 * Checks a target URL before any connection: scheme, credentials, names that mean this
 * machine, and IP literals (WHATWG URL has already normalised `127.1`, `0x7f.1`, `2130706433`
 * and `[::ffff:127.0.0.1]` into plain addresses). Throws TargetRefused.
 */
export function checkTargetUrl(raw: string | URL, policy: TargetPolicy): URL {
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : raw;
  } catch {
    throw new TargetRefused('the target URL is not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TargetRefused('the target URL must be http or https');
  if (url.username || url.password) throw new TargetRefused('the target URL must not carry credentials');
  // An empty label (`shop.example..`) names no host: refused, never folded into another name's
  // spelling, so one merchant has one canonical host (service-kit/host-name.ts).
  if (canonicalUrlHost(url) === undefined)
    throw new TargetRefused(`the target host '${url.hostname}' is malformed (an empty label)`);
  if (policy.allowPrivate || isExcepted(url, policy)) return url;
  const host = bareHost(url);
  const name = host.replace(/\.+$/, '');
  if (name === 'localhost' || name.endsWith('.localhost') || name === '')
    throw new TargetRefused(`the target host '${host}' is this machine`);
  if (isIP(host) && !isPublicAddress(host))
    throw new TargetRefused(`the target address ${host} is not a public address`);
  return url;
}

export type LookupFn = (
  hostname: string,
  options: { all: true },
  cb: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * A `lookup` for http.request / net.connect that resolves, then refuses unless every address
 * is public: the socket connects only to what was checked here.
 */
export function guardedLookup(policy: TargetPolicy, resolve: LookupFn = dnsLookup as unknown as LookupFn) {
  return (hostname: string, options: { all?: boolean; family?: number } | number, cb: (...args: any[]) => void) => {
    const opts = typeof options === 'number' ? { family: options } : (options ?? {});
    // One refusal for a name that resolves inside the network and for one that does not resolve at
    // all: two answers would tell a caller which internal names exist. The address is never named.
    const refused = () => new TargetRefused(`the target host '${hostname}' does not resolve to public addresses only`);
    resolve(hostname, { all: true }, (err, addresses) => {
      if (err) return cb(policy.allowPrivate ? err : refused());
      const list = (addresses ?? []).filter((a) => !opts.family || a.family === opts.family);
      if (list.length === 0)
        return cb(
          policy.allowPrivate
            ? Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' })
            : refused(),
        );
      if (!policy.allowPrivate && list.some((a) => !isPublicAddress(a.address))) return cb(refused());
      if (opts.all) cb(null, list);
      else cb(null, list[0]!.address, list[0]!.family);
    });
  };
}
