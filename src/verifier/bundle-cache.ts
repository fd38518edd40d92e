/**
 * The Trust Bundles a verifier has checked against its pinned root (PROTOCOL.md §12: "verify
 * what you trust, every time").
 *
 * Why this shape: a terminal passes the same large bundle (thousands of revoked grants) on every
 * payment, and canonicalizing it each time costs more than the payment's own signature checks.
 * Caching the answer per caller object is unsafe: the object can be edited in place after it was
 * checked. So the first time a bundle is seen, the verifier takes a deep copy, checks and verifies
 * *the copy*, freezes it and from then on reads only the copy: keys, scope, times, revocations.
 * Nothing the caller does to its own object afterwards can change a verdict.
 *
 * The copy is found again by the caller's object (or, for JSON text, by the text itself: text is
 * bytes and cannot change). Before it is reused, the caller's object is compared with it in O(size
 * of everything but the revocation list): every member, scope, issuer and key, and for
 * `revokedGrants` the array's identity and length (comparing 10,000 ids per payment would cost as
 * much as the payment). Any difference means "another bundle": it is copied and verified afresh,
 * so a newer signed bundle assigned into the same object is picked up, and a tampered one fails
 * its signature. The one edit this does not see, one revoked id overwritten by another in place,
 * is ignored: the copy keeps the id the root signed.
 */
import type { CtlCrypto } from '../crypto/types.js';
import type { TrustBundle } from '../artifacts/types.js';
import { checkBundle } from '../artifacts/bundle.js';
import { isPlainObject } from '../artifacts/schema.js';
import { signedByBundleKey, type BundleSigners } from './root-chain.js';
import { parseStrictJson } from '../encoding/jcs.js';
import { deepFreeze, MAX_BUNDLE_MEMBERS, ownData } from '../encoding/frozen-copy.js';
import { passUnsupported } from '../crypto/algorithm-support.js';
import { remember } from '../crypto/cache.js';

/** A bundle as the verifier holds it: a frozen copy and what the pinned root said of it. */
export interface CheckedBundle {
  /** Deep-frozen, owned by the cache; never the caller's object. */
  readonly bundle: TrustBundle;
  /** Signed by one of the keys allowed to sign bundles (the pinned root, or the newest root version's bundle keys). */
  readonly signatureOk: boolean;
  /** `bundle.revokedGrants` as a set, built once. */
  readonly revoked: ReadonlySet<string>;
}

interface Entry extends CheckedBundle {
  /** `BundleSigners.id` the copy was verified against: canonical bytes of the key set, never an object's identity. */
  readonly signersId: string;
  /** The caller's `revokedGrants` array when the copy was taken (compared by identity). */
  readonly callerRevoked: unknown;
}

export interface BundleCache {
  /** The checked bundle for `input` (an object or JSON text), or `undefined` when it is unreadable. Never throws. */
  check(input: unknown, signers: BundleSigners): Promise<CheckedBundle | undefined>;
}

/** Nesting of a bundle (bundle → issuers → issuer → keys → key → purposes) with room to spare. */
const MAX_DEPTH = 8;
/** JSON texts remembered; each may be megabytes. */
const MAX_TEXTS = 16;

/**
 * A cache of checked Trust Bundles for one verifier.
 * @example const bundles = createBundleCache(crypto); const b = await bundles.check(bundle, await
 * bundleSignersWith(crypto, rootPem)); if (b?.signatureOk) use(b.bundle)
 */
export function createBundleCache(c: CtlCrypto): BundleCache {
  const byObject = new WeakMap<object, Entry>();
  const byText = new Map<string, Entry>();

  async function checkCopy(copy: unknown, signers: BundleSigners, callerRevoked: unknown): Promise<Entry | undefined> {
    let bundle: TrustBundle;
    try {
      checkBundle(copy);
      bundle = copy;
    } catch {
      return undefined;
    }
    let signatureOk = false;
    try {
      signatureOk = await signedByBundleKey(c, bundle, signers);
    } catch (e) {
      passUnsupported(e); // a root this build cannot check is reported as such, not as a bad bundle
      signatureOk = false;
    }
    return { bundle, signatureOk, revoked: new Set(bundle.revokedGrants), signersId: signers.id, callerRevoked };
  }

  return {
    async check(input, signers) {
      try {
        if (typeof input === 'string') {
          const hit = byText.get(input);
          if (hit && hit.signersId === signers.id) return hit;
          const entry = await checkCopy(deepFreeze(parseStrictJson(input)), signers, undefined);
          if (entry) {
            byText.delete(input);
            remember(byText, input, entry, MAX_TEXTS);
          }
          return entry;
        }
        if (typeof input !== 'object' || input === null) return undefined;
        const hit = byObject.get(input);
        if (hit && hit.signersId === signers.id && sameAsCopy(input, hit)) return hit;
        const callerRevoked = (input as Record<string, unknown>)['revokedGrants'];
        // Read once into data of its own, to the same member limit as verifyTrustBundle's.
        const entry = await checkCopy(deepFreeze(ownData(input, MAX_BUNDLE_MEMBERS)), signers, callerRevoked);
        if (entry) byObject.set(input, entry);
        else byObject.delete(input);
        return entry;
      } catch (e) {
        passUnsupported(e);
        return undefined; // a throwing getter, a revoked Proxy, a cycle: unreadable
      }
    },
  };
}

/** The caller's object still looks like the copy (see the module comment for what is compared). */
function sameAsCopy(input: object, entry: Entry): boolean {
  const caller = input as Record<string, unknown>;
  const copy = entry.bundle as unknown as Record<string, unknown>;
  const keys = Object.keys(copy);
  if (Object.keys(caller).length !== keys.length) return false;
  for (const key of keys) {
    if (key === 'revokedGrants') {
      const r = caller[key];
      if (r !== entry.callerRevoked || !Array.isArray(r) || r.length !== entry.bundle.revokedGrants.length)
        return false;
    } else if (!sameJson(caller[key], copy[key], 0)) return false;
  }
  return true;
}

function sameJson(a: unknown, b: unknown, depth: number): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || depth > MAX_DEPTH) return false;
  if (Array.isArray(b)) {
    if (!Array.isArray(a) || a.length !== b.length) return false;
    for (let i = 0; i < b.length; i++) if (!sameJson(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (!isPlainObject(a)) return false;
  const keys = Object.keys(b);
  if (Object.keys(a).length !== keys.length) return false;
  for (const key of keys) {
    if (
      !Object.prototype.hasOwnProperty.call(a, key) ||
      !sameJson(a[key], (b as Record<string, unknown>)[key], depth + 1)
    )
      return false;
  }
  return true;
}
