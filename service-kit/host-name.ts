/**
 * One spelling per host, for everything that names or counts a merchant (the gateway's globs,
 * per-merchant limits, velocity, receipts, the console): `Shop.Example.`, `shop.example` and
 * `ＳＨＯＰ．example` are one merchant, and one merchant's payments count together.
 *
 * - Lower case, IDNA to ASCII (UTS #46, as WHATWG URL and `node:url` domainToASCII do:
 *   `bücher.example` → `xn--bcher-kva.example`), percent-escapes decoded, IPv4 in dotted decimal
 *   (`127.1`, `0x7f.1`, `2130706433` → `127.0.0.1`): what WHATWG URL's host parser gives.
 * - IPv6 without brackets, compressed, lower case (`[0:0::1]` → `::1`), and an IPv4-mapped address
 *   as the IPv4 address it reaches (`::ffff:127.0.0.1` → `127.0.0.1`).
 * - One trailing dot (the DNS root: `shop.example.` is the fully qualified `shop.example`) removed.
 * - An empty label anywhere else (`shop.example..`, `a..b`, `.shop.example`) is malformed, not
 *   repaired: RFC 1035 §3.1 allows the empty (root) label once, last, so no resolver owes such a
 *   name an answer, and resolvers differ on it (some strip the dots, some fail, some send the
 *   name as is). Folding it into `shop.example` would count a request whose destination is not
 *   that name's; refusing it leaves exactly one spelling per host.
 */
import { isIP } from 'node:net';

/**
 * The canonical form of `host` (a URL's `hostname`, or a bare name or address), or undefined when
 * it is not a host name or address (an empty label, characters a host cannot have).
 * @example canonicalHost('Shop.Example.') === 'shop.example'; canonicalHost('shop.example..') === undefined
 */
export function canonicalHost(host: string): string | undefined {
  const bracketed = host.startsWith('[') && host.endsWith(']');
  const literal6 = !bracketed && isIP(host) === 6;
  // A host alone: no port, path, credentials or spaces for the URL parser to take apart.
  if (!bracketed && !literal6 && /[/?#@:\\\s]/.test(host)) return undefined;
  let parsed: string;
  try {
    parsed = new URL(`http://${literal6 ? `[${host}]` : host}/`).hostname;
  } catch {
    return undefined;
  }
  if (parsed.startsWith('[')) return ipv4Mapped(parsed.slice(1, -1)) ?? parsed.slice(1, -1);
  const name = parsed.endsWith('.') ? parsed.slice(0, -1) : parsed;
  if (name === '' || name.split('.').some((label) => label === '')) return undefined;
  return name;
}

/** The canonical host of a URL (canonicalHost of its hostname), or undefined when malformed. */
export function canonicalUrlHost(url: URL): string | undefined {
  return canonicalHost(url.hostname);
}

/** `::ffff:a.b.c.d`, which WHATWG URL writes `::ffff:xxxx:yyyy`, as `a.b.c.d`; else undefined. */
function ipv4Mapped(v6: string): string | undefined {
  const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (!m) return undefined;
  const hi = parseInt(m[1]!, 16);
  const lo = parseInt(m[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}
