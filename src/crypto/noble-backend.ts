/**
 * The `noble` backend: pure JavaScript, synchronous inside, so it runs where there is no
 * WebCrypto, no TextEncoder and no getRandomValues (QuickJS on the firmware). RFC 8032 strict
 * mode (`zip215: false`) plus our own §3 checks in `strictVerifier`; ES256 accepts high-S on
 * verify (`lowS: false`, PROTOCOL.md §3) and emits low-S. `prehash: true`: noble hashes the
 * message with SHA-256 itself, so callers pass the message, not a digest.
 */
import * as ed from '@noble/ed25519';
import { p256 } from '@noble/curves/nist.js';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { CtlError } from '../errors.js';
import { checkPublicJwk, checkRawPublic, jwkKey } from './jwk.js';
import { signer, strictVerifier, type Backend } from './backend.js';
import type { Alg, PublicJwk } from './types.js';

/** The noble backend. @example const b = createNobleBackend(); await b.sha256(bytes) */
export function createNobleBackend(): Backend {
  // @noble/ed25519 v3 needs a synchronous SHA-512 for its sync API; set here, not at import, to keep the module side-effect free.
  if (!ed.hashes.sha512) ed.hashes.sha512 = sha512;
  const publicOf = (alg: Alg, d: Uint8Array): PublicJwk =>
    checkRawPublic(alg, alg === 'EdDSA' ? ed.getPublicKey(d) : p256.getPublicKey(d, false)).jwk;
  return {
    name: 'noble',
    async publicJwkFromRaw(alg, d) {
      return publicOf(alg, d);
    },
    async signerFromRaw(alg, d, publicJwk) {
      if (jwkKey(publicOf(alg, d)) !== jwkKey(checkPublicJwk(publicJwk).jwk)) {
        throw new CtlError('malformed', 'key: the public key does not belong to the private key');
      }
      const secret = d.slice();
      return alg === 'EdDSA'
        ? signer(alg, publicJwk, (m) => ed.sign(m, secret))
        : signer(alg, publicJwk, (m) => p256.sign(m, secret, { prehash: true, lowS: true }));
    },
    async verifierFromJwk(jwk) {
      const c = checkPublicJwk(jwk);
      return c.alg === 'EdDSA'
        ? strictVerifier(c.alg, c.jwk, (m, s) => ed.verify(s, m, c.raw, { zip215: false }))
        : strictVerifier(c.alg, c.jwk, (m, s) => p256.verify(s, m, c.raw, { prehash: true, lowS: false }));
    },
    async sha256(data) {
      return sha256(data);
    },
  };
}
