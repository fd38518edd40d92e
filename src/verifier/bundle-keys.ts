/**
 * PROTOCOL.md §5 step 1 through Trust Bundles: the grant's key from the newest live bundle of each
 * scope that lists its issuer, every bundle checked against the pinned root (or the newest root
 * of a rotation, §11); and the revocations of every bundle that passed, kept for good (§12).
 */
import type { CtlCrypto, PublicJwk } from '../crypto/types.js';
import type { PolicyGrant, TrustBundle } from '../artifacts/types.js';
import type { VerifyCtlOptions } from './options.js';
import { createBundleCache } from './bundle-cache.js';
import { bundleSignersWith, type BundleSigners } from './root-chain.js';
import { findKey } from '../artifacts/keys.js';
import { fail } from '../errors.js';
import { canonicalize, parseStrictJson } from '../encoding/jcs.js';
import { parseTimestamp } from '../values.js';
import { remember } from '../crypto/cache.js';

export interface BundleKeys {
  /**
   * The grant's key and the newest `issuedAt` of a live bundle that vouched for its issuer. For a
   * human-agent grant, `human` carries the DID's key (the bundle entry must be that key) and
   * whether `trustedHumans` already trusts the DID (then the bundles only add their revocations).
   */
  keyFromBundles(
    grant: PolicyGrant,
    o: VerifyCtlOptions,
    now: number,
    tol: number,
    human?: { jwk: PublicJwk; listed: boolean },
  ): Promise<{ jwk: PublicJwk; newestIssuedAt: number | undefined }>;
  /**
   * The revocations of every bundle that passed its root check (PROTOCOL.md §12: revocations are
   * permanent). An expired or superseded bundle vouches for no key, but what it revoked stays
   * revoked, on every path (bundles, JWKS, a pinned key). Never pruned by what a payer presents:
   * a revoked id is public, and anyone could show an expired grant bearing it. So the set grows
   * with the revocations this process has seen; a host that restarts passes `keptRevocations`.
   */
  readonly kept: ReadonlySet<string>;
}

/** @example const keys = createBundleKeys(c); const { jwk } = await keys.keyFromBundles(grant, o, now, 0) */
export function createBundleKeys(c: CtlCrypto): BundleKeys {
  const bundles = createBundleCache(c);
  /** Walked chains, keyed by the bytes of root + chain (never by object): a payment does not re-verify the chain. */
  const signersCache = new Map<string, Promise<BundleSigners>>();
  const keptRevoked = new Set<string>();
  const merged = new WeakSet<object>();
  function keepRevocations(checked: { revoked: ReadonlySet<string> }): void {
    if (merged.has(checked)) return;
    for (const id of checked.revoked) keptRevoked.add(id);
    merged.add(checked);
  }

  async function signersFor(o: VerifyCtlOptions): Promise<BundleSigners> {
    const root = o.rootPublicKeyPem!;
    let rootId: string;
    let chainId: string;
    let acceptedId: string;
    try {
      rootId = typeof root === 'string' ? root : canonicalize(await c.toPublicJwk(root));
      // JSON text of the chains as the caller holds them now (native, so cheap per payment); what
      // is walked is parsed back from this very text, so the cached verdict belongs to these bytes.
      chainId = o.rootChain === undefined ? '-' : JSON.stringify(o.rootChain);
      acceptedId = o.acceptedRootChain === undefined ? '-' : JSON.stringify(o.acceptedRootChain);
      if (typeof chainId !== 'string' || typeof acceptedId !== 'string') throw new Error('not JSON');
    } catch {
      return fail('malformed', 'rootPublicKeyPem, rootChain or acceptedRootChain is not usable');
    }
    const key = `${rootId}\u0000${chainId}\u0000${acceptedId}\u0000${o.minRootVersion ?? ''}`;
    let p = signersCache.get(key);
    if (!p) {
      const parse = (text: string) => (text === '-' ? undefined : parseStrictJson(text));
      p = bundleSignersWith(c, root, parse(chainId), o.minRootVersion, parse(acceptedId));
      remember(signersCache, key, p, 64);
    }
    return p;
  }

  async function keyFromBundles(
    grant: PolicyGrant,
    o: VerifyCtlOptions,
    now: number,
    tol: number,
    human?: { jwk: PublicJwk; listed: boolean },
  ) {
    if (!o.rootPublicKeyPem)
      fail('malformed', 'trustBundles need rootPublicKeyPem (the root never comes from a bundle)');
    const signers = await signersFor(o);
    const valid: TrustBundle[] = [];
    let expiredLists = false;
    let invalidLists = false;
    for (const b of o.trustBundles!) {
      // The verifier's own frozen copy of what the root signed, never the caller's object (PROTOCOL.md §12).
      const checked = await bundles.check(b, signers);
      if (!checked) continue; // unreadable: it cannot vouch for anyone
      const bundle = checked.bundle;
      const lists = bundle.issuers.some((i) => i.issuer === grant.issuer);
      if (!checked.signatureOk) {
        invalidLists ||= lists;
        continue;
      }
      // Signed by the root: what it revoked stands from now on, whatever its age (PROTOCOL.md §12).
      keepRevocations(checked);
      const expired = now >= parseTimestamp(bundle.expiresAt, 'bundle.expiresAt') + tol;
      const future = parseTimestamp(bundle.issuedAt, 'bundle.issuedAt') > now + tol;
      if (expired || future) {
        expiredLists ||= lists && expired;
        continue;
      }
      valid.push(bundle);
    }
    // Per scope only the newest bundle counts: an older one passed beside it must not keep a key
    // alive that the newer one dropped (PROTOCOL.md §4 `sequence`). Revocations are unioned, which
    // can only refuse more.
    const newest = new Map<string, TrustBundle>();
    for (const b of valid) {
      const scope = canonicalize(b.scope);
      const seen = newest.get(scope);
      if (!seen || b.sequence > seen.sequence) newest.set(scope, b);
    }
    const vouching = [...newest.values()].filter((b) => b.issuers.some((i) => i.issuer === grant.issuer));
    // Revocation freshness for a person trusted by `trustedHumans` alone: the newest bundle given.
    if (vouching.length === 0 && human?.listed) {
      const newestIssuedAt =
        valid.length === 0 ? undefined : Math.max(...valid.map((b) => parseTimestamp(b.issuedAt, 'bundle.issuedAt')));
      return { jwk: human.jwk, newestIssuedAt };
    }
    if (vouching.length === 0) {
      if (expiredLists) fail('trust_bundle_expired', `the only bundles listing ${grant.issuer} have expired`);
      if (invalidLists) {
        const which = signers.rootVersion > 1 ? ` (root version ${signers.rootVersion}: one of its bundle keys)` : '';
        fail('trust_bundle_invalid', `the bundle listing ${grant.issuer} is not signed by the pinned root${which}`);
      }
      fail('issuer_not_trusted', `no trust bundle lists issuer ${grant.issuer}`);
    }
    const keys = vouching.flatMap((b) => b.issuers.filter((i) => i.issuer === grant.issuer).flatMap((i) => i.keys));
    const jwk = findKey(keys, grant.keyId, 'grant');
    if (human && canonicalize(jwk) !== canonicalize(human.jwk))
      fail('unknown_key', `the bundle lists a key other than the DID's for ${grant.issuer}`);
    const newestIssuedAt = Math.max(...vouching.map((b) => parseTimestamp(b.issuedAt, 'bundle.issuedAt')));
    return { jwk, newestIssuedAt };
  }

  return { keyFromBundles, kept: keptRevoked };
}
