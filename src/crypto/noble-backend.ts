/**
 * The `noble` backend: pure JavaScript, synchronous inside, so it runs where there is no
 * WebCrypto, no TextEncoder and no getRandomValues (QuickJS on the firmware). RFC 8032 strict
 * decoding plus our own §3 checks in `strictVerifier`; ES256 accepts high-S on
 * verify (`lowS: false`, PROTOCOL.md §3) and emits low-S. `prehash: true`: noble hashes the
 * message with SHA-256 itself, so callers pass the message, not a digest.
 *
 * Ed25519 verification is cofactorless ([S]B - [k]A must encode to R exactly), as OpenSSL and
 * libsodium do: noble's own verify is cofactored even with `zip215: false`, and would accept
 * signatures under mixed-order keys (speccheck cases 4 and 5) that the native backend refuses.
 * Both equations are RFC 8032; one rule for every backend is what §3 needs.
 */
import * as ed from '@noble/ed25519';
import { p256 } from '@noble/curves/nist.js';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { base64urlEncode } from '../encoding/base64url.js';
import { checkPublicJwk, checkRawPublic } from './jwk.js';
import { ownPublicKey, signer, strictVerifier, type Backend } from './backend.js';
import { L, le } from './strict.js';
import { concat } from './der.js';
import type { Alg, PublicJwk } from './types.js';

/** Cofactorless RFC 8032 §5.1.7 check; the caller has already applied the §3 shape rules (S < L, R canonical). */
function ed25519Verify(sig: Uint8Array, msg: Uint8Array, pub: Uint8Array): boolean {
  const A = ed.Point.fromBytes(pub, false);
  const R = sig.subarray(0, 32);
  const k = le(sha512(concat(R, pub, msg))) % L;
  const check = ed.Point.BASE.multiply(le(sig.subarray(32)), false).subtract(A.multiply(k, false)).toBytes();
  let diff = 0;
  for (let i = 0; i < 32; i++) diff |= check[i]! ^ R[i]!;
  return diff === 0;
}

/** The noble backend. @example const b = createNobleBackend(); await b.sha256(bytes) */
export function createNobleBackend(): Backend {
  // @noble/ed25519 v3 needs a synchronous SHA-512 for its sync API; set here, not at import, to keep the module side-effect free.
  if (!ed.hashes.sha512) ed.hashes.sha512 = sha512;
  const publicOf = (alg: Alg, d: Uint8Array): PublicJwk =>
    alg === 'EdDSA'
      ? checkPublicJwk({ kty: 'OKP', crv: 'Ed25519', x: base64urlEncode(ed.getPublicKey(d)) }, false).jwk
      : checkRawPublic(alg, p256.getPublicKey(d, false)).jwk;
  return {
    name: 'noble',
    async publicJwkFromRaw(alg, d) {
      return publicOf(alg, d);
    },
    signerFromRaw(alg, d, publicJwk) {
      return this.signerFor(alg, d, publicJwk);
    },
    async signerFor(alg, d, claimed) {
      const pub = ownPublicKey(publicOf(alg, d), claimed);
      const secret = d.slice();
      return alg === 'EdDSA'
        ? signer(alg, pub, (m) => ed.sign(m, secret))
        : signer(alg, pub, (m) => p256.sign(m, secret, { prehash: true, lowS: true }));
    },
    async verifierFromJwk(jwk) {
      const c = checkPublicJwk(jwk);
      return c.alg === 'EdDSA'
        ? strictVerifier(c.alg, c.jwk, (m, s) => ed25519Verify(s, m, c.raw))
        : strictVerifier(c.alg, c.jwk, (m, s) => p256.verify(s, m, c.raw, { prehash: true, lowS: false }));
    },
    async sha256(data) {
      return sha256(data);
    },
  };
}
