/**
 * A deep, frozen copy of checked I-JSON: what a party keeps of an artifact it will sign or verify
 * against many times, so the caller's later edits in place cannot change it (PROTOCOL.md §12).
 */
import { canonicalize, parseStrictJson } from './jcs.js';

/** @example const own = frozenJsonCopy(grant); Object.isFrozen(own.allowedRails) // true */
export function frozenJsonCopy<T>(value: T): T {
  return deepFreeze(parseStrictJson(canonicalize(value))) as T;
}

/** Freezes fresh data in place (what `parseStrictJson` returned: no copy needed). @example deepFreeze(parseStrictJson(text)) */
export function deepFreeze(v: unknown): unknown {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}
