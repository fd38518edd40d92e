/**
 * The `noble` backend: pure JavaScript, synchronous inside, so it runs where there is no
 * WebCrypto, no TextEncoder and no getRandomValues (QuickJS on the firmware). RFC 8032 strict
 * decoding plus our own §3 checks in `strictVerifier`. Ed25519 only, unless the host registered
 * a P-256 (`registerP256(nobleP256)` from `ctl/p256`): without one, a P-256 key is
 * `unsupported_algorithm` (algorithm-support.ts), so an Ed25519 device never carries that stack.
 *
 * Ed25519 verification is cofactorless ([S]B - [k]A must encode to R exactly), as OpenSSL and
 * libsodium do: noble's own verify is cofactored even with `zip215: false`, and would accept
 * signatures under mixed-order keys (speccheck cases 4 and 5) that the native backend refuses.
 * Both equations are RFC 8032; one rule for every backend is what §3 needs.
 *
 * `ctl/verify` builds noble-verify-backend.ts instead (rollup.config.mjs): the same check in our
 * own BigInt arithmetic (ed25519-verify.ts), without noble, as a terminal never signs; where noble
 * is in the bundle anyway for signing, its point arithmetic serves verification too.
 */
import * as ed from '@noble/ed25519';
import { sha256, sha512 } from './sha2.js';
import { base64urlEncode } from '../encoding/base64url.js';
import { checkPublicJwk, checkRawPublic } from './jwk.js';
import { ownPublicKey, signer, strictVerifier, type Backend } from './backend.js';
import { registeredP256 } from './algorithm-support.js';
import { L, le } from './strict.js';
import { concat } from './der.js';
import type { Alg, PublicJwk } from './types.js';
import { naf5 } from './naf.js';

type EdPoint = InstanceType<typeof ed.Point>;

/** P, 3P, 5P, …, 15P: the table a width-5 NAF digit indexes. */
function oddMultiples(p: EdPoint): EdPoint[] {
  const twice = p.double();
  const t = [p];
  for (let i = 1; i < 8; i++) t.push(t[i - 1]!.add(twice));
  return t;
}

let baseTable: EdPoint[] | undefined;

/**
 * s·B + k·Q in one pass (Straus–Shamir, width-5 NAF): about 254 doublings and 85 additions, with
 * a base table of 8 points instead of noble's 4,224-point one, whose construction dominated a
 * QuickJS device's first verification. Variable time: inputs are public in verification.
 */
function doubleScalarMul(s: bigint, k: bigint, qTable: EdPoint[]): EdPoint {
  const bt = (baseTable ??= oddMultiples(ed.Point.BASE));
  const ds = naf5(s);
  const dk = naf5(k);
  let top = ds.length - 1;
  while (top >= 0 && ds[top] === 0 && dk[top] === 0) top--;
  let acc = ed.Point.ZERO;
  for (let i = top; i >= 0; i--) {
    acc = acc.double();
    const a = ds[i]!;
    const b = dk[i]!;
    if (a) acc = a > 0 ? acc.add(bt[a >> 1]!) : acc.subtract(bt[-a >> 1]!);
    if (b) acc = b > 0 ? acc.add(qTable[b >> 1]!) : acc.subtract(qTable[-b >> 1]!);
  }
  return acc;
}

/**
 * Cofactorless RFC 8032 §5.1.7 check for one public key: [S]B − [k]A must encode to R exactly.
 * The key's point is decoded (a square root) and its table built once, not per signature; the
 * caller has already applied the §3 shape rules (S < L, R canonical, A not of small order).
 */
function ed25519Verifier(pub: Uint8Array): (msg: Uint8Array, sig: Uint8Array) => boolean {
  const minusA = oddMultiples(ed.Point.fromBytes(pub, false).negate());
  return (msg, sig) => {
    const R = sig.subarray(0, 32);
    const k = le(sha512(concat(R, pub, msg))) % L;
    const check = doubleScalarMul(le(sig.subarray(32)), k, minusA).toBytes();
    let diff = 0;
    for (let i = 0; i < 32; i++) diff |= check[i]! ^ R[i]!;
    return diff === 0;
  };
}

/** The noble backend. @example const b = createNobleBackend(); await b.sha256(bytes) */
export function createNobleBackend(): Backend {
  // @noble/ed25519 v3 needs a synchronous SHA-512 for its sync API; set here, not at import, to keep the module
  // side-effect free.
  if (!ed.hashes.sha512) ed.hashes.sha512 = sha512 as NonNullable<typeof ed.hashes.sha512>;
  const publicOf = (alg: Alg, d: Uint8Array): PublicJwk =>
    alg === 'EdDSA'
      ? checkPublicJwk({ kty: 'OKP', crv: 'Ed25519', x: base64urlEncode(ed.getPublicKey(d)) }, false).jwk
      : checkRawPublic(alg, registeredP256().publicKey(d)).jwk;
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
        : signer(alg, pub, (m) => registeredP256().sign(m, secret));
    },
    async verifierFromJwk(jwk) {
      const c = checkPublicJwk(jwk);
      if (c.alg === 'EdDSA') return strictVerifier(c.alg, c.jwk, ed25519Verifier(c.raw));
      const p = registeredP256(); // unsupported_algorithm at import, before any signature is read
      return strictVerifier(c.alg, c.jwk, (m, s) => p.verify(s, m, c.raw));
    },
    async sha256(data) {
      return sha256(data);
    },
  };
}
