/**
 * Width-5 non-adjacent form of a scalar, for the Straus–Shamir double-scalar multiplications of the
 * Ed25519 verifiers (ed25519-verify.ts, noble-backend.ts). Variable time: public scalars only.
 */

/**
 * Width-5 NAF digits of a scalar, least significant first: odd digits in (-16, 16), mostly zeros. @example naf5(7n)[0]
 * // 7
 */
export function naf5(k: bigint): Int8Array {
  const out = new Int8Array(258);
  for (let i = 0; k > 0n; i++, k >>= 1n) {
    if (k & 1n) {
      let d = Number(k & 31n);
      if (d >= 16) d -= 32;
      out[i] = d;
      k -= BigInt(d);
    }
  }
  return out;
}
