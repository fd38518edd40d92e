/**
 * The pure-JS P-256 of `ctl/p256` (@noble/curves), for hosts with neither node:crypto nor
 * WebCrypto. Not in any other bundle: a host registers it explicitly (algorithm-support.ts).
 *
 * Built from the abstract curve rather than imported from '@noble/curves/nist.js': that module
 * also builds FROST/OPRF suites at load, which call TextEncoder, and QuickJS has none. These are
 * the SEC 2 v2 §2.4.2 parameters nist.js uses. The curve is built on first use, not at load.
 */
import { ecdsa, weierstrass } from '@noble/curves/abstract/weierstrass.js';
import { sha256 } from '@noble/hashes/sha2.js';
import type { P256Provider } from './algorithm-support.js';

let curve: ReturnType<typeof ecdsa> | undefined;
const p256 = () =>
  (curve ??= ecdsa(
    weierstrass({
      p: 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn,
      n: 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n,
      h: 1n,
      a: 0xffffffff00000001000000000000000000000000fffffffffffffffffffffffcn,
      b: 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn,
      Gx: 0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296n,
      Gy: 0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5n,
    }),
    sha256,
  ));

/**
 * P-256 ECDSA in pure JS. `prehash: true`: noble hashes the message itself; verify accepts
 * high S (PROTOCOL.md §3), signing emits low S.
 * @example registerP256(nobleP256)
 */
export const nobleP256: P256Provider = Object.freeze({
  publicKey: (d: Uint8Array) => p256().getPublicKey(d, false),
  sign: (message: Uint8Array, d: Uint8Array) => p256().sign(message, d, { prehash: true, lowS: true }),
  verify: (signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array) =>
    p256().verify(signature, message, publicKey, { prehash: true, lowS: false }),
});
