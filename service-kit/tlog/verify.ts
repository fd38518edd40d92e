/**
 * RFC 9162 §2.1.4.2: verifying a consistency proof, which a witness does before it cosigns
 * (the SDK's `ctl/log` verifies for clients; services use this one, over node:crypto).
 */
import { nodeHash } from './merkle.js';

export function verifyConsistency(
  first: number,
  second: number,
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!(Number.isSafeInteger(first) && Number.isSafeInteger(second) && 0 <= first && first <= second)) return false;
  if (first === second) return proof.length === 0 && Buffer.from(firstRoot).equals(Buffer.from(secondRoot));
  if (first === 0) return proof.length === 0;
  if (proof.length === 0) return false;
  const path = (first & (first - 1)) === 0 ? [firstRoot, ...proof] : [...proof];
  // Sizes up to 2^53: shift with division, not the 32-bit operators.
  let fn = first - 1;
  let sn = second - 1;
  const odd = (x: number) => x % 2 === 1;
  const half = (x: number) => Math.floor(x / 2);
  while (odd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr: Uint8Array = path[0]!;
  let sr: Uint8Array = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return Buffer.from(fr).equals(Buffer.from(firstRoot)) && Buffer.from(sr).equals(Buffer.from(secondRoot)) && sn === 0;
}
