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

/**
 * Data that can change no more: every object in it frozen and every member a value, not a getter
 * (what `frozenJsonCopy` returns). Freezing cannot be undone, so what is true of such data once
 * stays true: its canonical text may be kept by object (PROTOCOL.md §12). For checked JSON (no cycles).
 * @example isDeepFrozen(frozenJsonCopy({ a: [1] })) // true
 */
export function isDeepFrozen(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return true;
  if (!Object.isFrozen(v)) return false;
  for (const d of Object.values(Object.getOwnPropertyDescriptors(v))) if (!('value' in d) || !isDeepFrozen(d.value)) return false;
  return true;
}
