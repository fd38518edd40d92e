/**
 * The `noble` backend as `ctl/verify` builds it (rollup.config.mjs swaps it in for
 * noble-backend.ts): verification only, in our own BigInt Ed25519 (ed25519-verify.ts) and the
 * registered P-256 if any, so a terminal carries no signing stack. Its facade refuses private keys
 * before any of these would be asked to sign (createVerifyOnlyCrypto).
 */
import { sha256 } from './sha2.js';
import { badKey, checkPublicJwk } from './jwk.js';
import { strictVerifier, type Backend } from './backend.js';
import { registeredP256 } from './algorithm-support.js';
import { ed25519Verifier } from './ed25519-verify.js';

/** @example await createNobleBackend().verifierFromJwk(jwk) */
export function createNobleBackend(): Backend {
  const refuse = async (): Promise<never> => badKey('ctl/verify verifies only: private keys need ctl/wallet or ctl');
  return {
    name: 'noble',
    publicJwkFromRaw: refuse,
    signerFromRaw: refuse,
    signerFor: refuse,
    async verifierFromJwk(jwk) {
      const c = checkPublicJwk(jwk);
      if (c.alg === 'EdDSA') return strictVerifier(c.alg, c.jwk, ed25519Verifier(c.raw));
      const p = registeredP256(); // unsupported_algorithm at import, before any signature is read
      return strictVerifier(c.alg, c.jwk, (m, s) => p.verify(s, m, c.raw));
    },
    sha256: async (d) => sha256(d),
  };
}
