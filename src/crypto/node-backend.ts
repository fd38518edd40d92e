/**
 * The `native` backend on hosts with node:crypto (Node ≥ 20.16, Bun, Deno): synchronous
 * `crypto.sign`/`crypto.verify` over KeyObjects, several times faster than WebCrypto's promises.
 * Strictness (PROTOCOL.md §3) comes from `strictVerifier`, not from OpenSSL, which alone accepts
 * some small-order Ed25519 keys.
 */
import { checkPublicJwk } from './jwk.js';
import { pkcs8 } from './der.js';
import { ownPublicKey, signer, strictVerifier, type Backend } from './backend.js';
import type { Alg, PublicJwk } from './types.js';

const P1363 = 'ieee-p1363';
const u8 = (b: Uint8Array): Uint8Array => new Uint8Array(b); // a plain copy, never a Node buffer

/**
 * The node:crypto backend over the given module (from `hostNodeCrypto()`). @example createNodeBackend(hostNodeCrypto())
 */
export function createNodeBackend(nc: any): Backend {
  const privateKeyObject = (alg: Alg, d: Uint8Array) =>
    nc.createPrivateKey({ key: pkcs8(alg, d), format: 'der', type: 'pkcs8' });
  const publicOf = (priv: any): PublicJwk =>
    checkPublicJwk(nc.createPublicKey(priv).export({ format: 'jwk' }), false).jwk;
  return {
    name: 'native',
    async publicJwkFromRaw(alg, d) {
      return publicOf(privateKeyObject(alg, d));
    },
    signerFromRaw(alg, d, publicJwk) {
      return this.signerFor(alg, d, publicJwk);
    },
    async signerFor(alg, d, claimed) {
      const key = privateKeyObject(alg, d);
      const pub = ownPublicKey(publicOf(key), claimed);
      return alg === 'EdDSA'
        ? signer(alg, pub, (m) => u8(nc.sign(null, m, key)))
        : signer(alg, pub, (m) => u8(nc.sign('sha256', m, { key, dsaEncoding: P1363 })));
    },
    async verifierFromJwk(jwk) {
      const c = checkPublicJwk(jwk);
      const key = nc.createPublicKey({ key: c.jwk, format: 'jwk' });
      return c.alg === 'EdDSA'
        ? strictVerifier(c.alg, c.jwk, (m, s) => nc.verify(null, m, key, s))
        : strictVerifier(c.alg, c.jwk, (m, s) => nc.verify('sha256', m, { key, dsaEncoding: P1363 }, s));
    },
    async sha256(data) {
      return u8(nc.createHash('sha256').update(data).digest());
    },
  };
}
