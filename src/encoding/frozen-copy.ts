/**
 * What a party keeps of a caller's artifact (PROTOCOL.md §12): a deep, frozen copy of checked
 * I-JSON, for one it will sign or verify against many times, so the caller's later edits in place
 * cannot change it; and `ownData`, the artifact read once into plain data, for one it checks and
 * verifies now, so every step sees the same members as the signed bytes.
 */
import { canonicalize, isPlainObject, parseStrictJson } from './jcs.js';
import { malformed } from '../errors.js';

/** @example const own = frozenJsonCopy(grant); Object.isFrozen(own.allowedRails) // true */
export function frozenJsonCopy<T>(value: T): T {
  return deepFreeze(parseStrictJson(canonicalize(value))) as T;
}

/**
 * Freezes fresh data in place (what `parseStrictJson` returned: no copy needed). @example
 * deepFreeze(parseStrictJson(text))
 */
export function deepFreeze(v: unknown): unknown {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/**
 * Data that can change no more: every object in it frozen and every member a value, not a getter
 * (what `frozenJsonCopy` returns). Freezing cannot be undone, so what is true of such data once
 * stays true: its canonical text may be kept by object (PROTOCOL.md §12). For checked JSON (no cycles).
 * @example isDeepFrozen(frozenJsonCopy({ a: [1] })) // true
 */
export function isDeepFrozen(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return true;
  if (!Object.isFrozen(v)) return false;
  for (const d of Object.values(Object.getOwnPropertyDescriptors(v)))
    if (!('value' in d) || !isDeepFrozen(d.value)) return false;
  return true;
}

/**
 * A caller's object as data, each member read once (PROTOCOL.md §12: verify what you trust): a
 * deep copy of the own enumerable members, the ones canonicalize writes into signed bytes. A
 * getter cannot show the checks one value and the signature or the policy steps another, and a
 * member left out of the signed text (non-enumerable, inherited) is not there to steer a verdict.
 * What is not JSON data (a class instance, a Map) is kept as it is, for the checks to refuse. Past
 * `maxMembers` members in all, or 64 levels, it is `malformed`: a graph that shares one child at
 * every level cannot make the copy long.
 * @example const own = ownData(sba); own !== sba && canonicalize(own) === canonicalize(sba) // true
 */
export function ownData(value: unknown, maxMembers = 10_000): unknown {
  let left = maxMembers;
  const copy = (v: unknown, depth: number): unknown => {
    const array = Array.isArray(v);
    if (!array && !isPlainObject(v)) return v;
    // Each length and key list read once: what is counted is what is copied.
    const keys = array ? undefined : Object.keys(v);
    const n = keys ? keys.length : (v as unknown[]).length;
    left -= n;
    if (depth > 64 || left < 0) malformed('too large or too deeply nested');
    if (!keys) {
      const out: unknown[] = [];
      for (let i = 0; i < n; i++) out.push(copy((v as unknown[])[i], depth + 1));
      return out;
    }
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      const x = copy((v as Record<string, unknown>)[k], depth + 1);
      // An own data member even for "__proto__", as parseStrictJson makes it: never the prototype.
      if (k === '__proto__')
        Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
      else out[k] = x;
    }
    return out;
  };
  return copy(value, 0);
}

/**
 * An artifact as a verifier takes it: JSON text parsed strictly, an object read once into data of
 * its own (`ownData`), so that what is checked is what is verified and returned (PROTOCOL.md §12).
 * @example const sba = artifactData(req.body.sba) // checks and signatures then read only `sba`
 */
export const artifactData = (input: unknown, maxMembers?: number): unknown =>
  typeof input === 'string' ? parseStrictJson(input) : ownData(input, maxMembers);

/**
 * The members a Trust Bundle given as an object may have in all, in every verifier that reads one
 * (`verifyTrustBundle`, `verifyCtl`'s bundles): one limit, so no bundle is accepted by one and
 * refused by the other. Room for a fleet's revocations (a million ids is some 30 MB of JSON).
 */
export const MAX_BUNDLE_MEMBERS = 1_000_000;
