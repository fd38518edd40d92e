/**
 * The `native` backend on hosts with WebCrypto only (browsers, Deno, workers), and the one
 * backend of the edge build: no noble anywhere in this file's imports. Strictness (PROTOCOL.md §3)
 * comes from `strictVerifier`, and ES256 low-S from `signer`, since WebCrypto does neither.
 */
import { checkPublicJwk } from './jwk.js';
import { pkcs8 } from './der.js';
import { ownPublicKey, signer, strictVerifier, type Backend, type VerifyBackend } from './backend.js';
import type { Alg, PublicJwk } from './types.js';

/**
 * WebCrypto's name for an algorithm: `Ed25519`, or ECDSA on P-256 with SHA-256. @example webAlg('ES256').name //
 * 'ECDSA'
 */
export function webAlg(alg: Alg): { name: string; namedCurve?: string; hash?: string } {
  return alg === 'EdDSA' ? { name: 'Ed25519' } : { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
}

// TypeScript's DOM types want ArrayBuffer-backed views; ours always are.
const buf = (b: Uint8Array) => b as Uint8Array<ArrayBuffer>;

/**
 * Verification and SHA-256 over WebCrypto: all a verify-only build (dist/edge.js) needs. @example
 * createSubtleVerifyBackend(hostSubtle()!)
 */
export function createSubtleVerifyBackend(subtle: SubtleCrypto): VerifyBackend {
  return {
    name: 'native',
    async verifierFromJwk(jwk) {
      const c = checkPublicJwk(jwk);
      const key = await subtle.importKey('raw', buf(c.raw), webAlg(c.alg), true, ['verify']);
      return strictVerifier(c.alg, c.jwk, async (m, s) => subtle.verify(webAlg(c.alg), key, buf(s), buf(m)));
    },
    async sha256(data) {
      return new Uint8Array(await subtle.digest('SHA-256', buf(data)));
    },
  };
}

/**
 * The WebCrypto backend over the given SubtleCrypto (from `hostSubtle()`). @example createSubtleBackend(hostSubtle()!)
 */
export function createSubtleBackend(subtle: SubtleCrypto): Backend {
  // Extractable, to read the public half: the private bytes are in this process's memory already.
  const importPrivate = (alg: Alg, d: Uint8Array) =>
    subtle.importKey('pkcs8', buf(pkcs8(alg, d)), webAlg(alg), true, ['sign']);
  const publicOf = async (key: CryptoKey): Promise<PublicJwk> =>
    checkPublicJwk(await subtle.exportKey('jwk', key), false).jwk;
  const publicJwkFromRaw = async (alg: Alg, d: Uint8Array): Promise<PublicJwk> => publicOf(await importPrivate(alg, d));
  return {
    ...createSubtleVerifyBackend(subtle),
    publicJwkFromRaw,
    signerFromRaw(alg, d, publicJwk) {
      return this.signerFor(alg, d, publicJwk);
    },
    async signerFor(alg, d, claimed) {
      const key = await importPrivate(alg, d);
      return subtleSigner(subtle, alg, ownPublicKey(await publicOf(key), claimed), key);
    },
  };
}

/**
 * A SigningKey over a private CryptoKey (also a non-extractable one). @example subtleSigner(subtle, 'EdDSA', jwk, key)
 */
export function subtleSigner(subtle: SubtleCrypto, alg: Alg, publicJwk: PublicJwk, key: CryptoKey) {
  return signer(alg, publicJwk, async (m) => new Uint8Array(await subtle.sign(webAlg(alg), key, buf(m))));
}
