/**
 * PROTOCOL.md §5 step 1 through the authority's JWKS: given, or fetched from `jwksUrl` and cached
 * `jwksTtl` ms (fetched again early, at most every 5 s, when a grant names a kid it lacks: a key
 * rotated in). `unknown_key` when the kid is absent or the JWKS cannot be had.
 */
import type { PublicJwk } from '../crypto/types.js';
import type { Jwks, PolicyGrant } from '../artifacts/types.js';
import type { VerifyCtlOptions } from './options.js';
import { featureOf, viaModule, type VerifierFeatures } from './features.js';
import { findKey } from '../artifacts/keys.js';
import { fail } from '../errors.js';
import { remember } from '../crypto/cache.js';

export type KeyFromJwks = (
  grant: PolicyGrant,
  o: VerifyCtlOptions,
  now: number,
  ttl: number,
  timeoutMs: number,
) => Promise<PublicJwk>;

/** @example const keyFromJwks = createJwksKeys(builtIn); await keyFromJwks(grant, o, now, 300_000, 3000) */
export function createJwksKeys(builtIn: VerifierFeatures): KeyFromJwks {
  const jwksCache = new Map<string, { at: number; jwks: Jwks }>();
  async function keyFromJwks(
    grant: PolicyGrant,
    o: VerifyCtlOptions,
    now: number,
    ttl: number,
    timeoutMs: number,
  ): Promise<PublicJwk> {
    if (o.jwks) return findKey(o.jwks.keys, grant.keyId, 'grant');
    const url = o.jwksUrl!;
    let entry = jwksCache.get(url);
    const stale = !entry || now - entry.at >= ttl;
    const missing = entry && !entry.jwks.keys.some((k) => k.kid === grant.keyId) && now - entry.at > 5_000;
    if (stale || missing) {
      if (o.offline) fail('unknown_key', 'offline, and the JWKS is not cached');
      const online = featureOf(builtIn, 'online', 'jwksUrl needs the JWKS fetched');
      let body: unknown;
      try {
        body = await viaModule(() => online.fetchJson(o.fetch ?? online.hostFetch(), url, { timeoutMs }));
      } catch (e) {
        fail('unknown_key', `the JWKS could not be fetched: ${(e as Error).message}`);
      }
      if (typeof body !== 'object' || body === null || !Array.isArray((body as Jwks).keys))
        fail('unknown_key', 'the JWKS has no keys array');
      entry = remember(jwksCache, url, { at: now, jwks: body as Jwks }, 64);
    }
    return findKey(entry!.jwks.keys, grant.keyId, 'grant');
  }
  return keyFromJwks;
}
