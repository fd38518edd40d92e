/**
 * What every backend shares: the strict wrapper that makes a backend's verify obey PROTOCOL.md §3
 * whatever the backend itself accepts, and the signer wrapper that makes ES256 emit low-S. Each
 * backend builds its keys through these, so no backend is ever used without them.
 */
import { CtlError, malformed } from '../errors.js';
import { checkPublicJwk, jwkKey } from './jwk.js';
import { lowS, signatureShapeOk } from './strict.js';
import type { Alg, CryptoBackend, PublicJwk, SigningKey, VerifyingKey } from './types.js';

/** What verifying needs of a backend (the public-key importer's, and all a verify-only build carries). */
export type VerifyBackend = Pick<CryptoBackend, 'name' | 'verifierFromJwk' | 'sha256'>;

/** A backend as the facades use it: `CryptoBackend` plus deriving a public key from a raw private one. */
export interface Backend extends CryptoBackend {
  /** The public JWK of a 32-byte Ed25519 seed or P-256 scalar (already range-checked). */
  publicJwkFromRaw(alg: Alg, d: Uint8Array): Promise<PublicJwk>;
  /** A signer for `d`, its public key derived once; a `claimed` public key must be that one (`malformed` otherwise). */
  signerFor(alg: Alg, d: Uint8Array, claimed?: PublicJwk): Promise<SigningKey>;
}

/**
 * The public key a signer announces: the derived one, after checking the claimed one (from a
 * PKCS#8 v2 / SEC1 field, a private JWK's x/y, or a `signerFromRaw` caller) is the same key.
 * @example ownPublicKey(derived, claimed) // derived, or throws CtlError('malformed')
 */
export function ownPublicKey(derived: PublicJwk, claimed?: PublicJwk): PublicJwk {
  if (claimed && jwkKey(checkPublicJwk(claimed, false).jwk) !== jwkKey(derived)) {
    malformed('key: the public key does not belong to the private key');
  }
  return derived;
}

type RawVerify = (message: Uint8Array, signature: Uint8Array) => boolean | Promise<boolean>;
type RawSign = (message: Uint8Array) => Uint8Array | Promise<Uint8Array>;

/**
 * A verifying key whose `verify` checks §3 first and never throws. The key itself was checked
 * (`checkPublicJwk`) before `raw` was built.
 * @example strictVerifier('EdDSA', jwk, (m, s) => backendVerify(m, s))
 */
export function strictVerifier(alg: Alg, publicJwk: PublicJwk, raw: RawVerify): VerifyingKey {
  // Frozen: cached keys are shared by every caller of the facade.
  const key: VerifyingKey = {
    kind: 'verifying',
    alg,
    publicJwk: Object.freeze({ ...publicJwk }),
    async verify(message, signature) {
      try {
        if (!(message instanceof Uint8Array) || !signatureShapeOk(alg, signature)) return false;
        return (await raw(message, signature)) === true;
      } catch {
        return false; // any defect is a refusal (§3), never an exception
      }
    },
  };
  return Object.freeze(key);
}

/**
 * A signing key that emits 64-byte signatures, low-S for ES256 (§3).
 * @example signer('ES256', jwk, (m) => backendSign(m))
 */
export function signer(alg: Alg, publicJwk: PublicJwk, raw: RawSign): SigningKey {
  const key: SigningKey = {
    kind: 'signing',
    alg,
    publicJwk: Object.freeze({ ...publicJwk }),
    async sign(message) {
      if (!(message instanceof Uint8Array)) throw new TypeError('sign(message): message must be a Uint8Array');
      const sig = await raw(message);
      if (sig.length !== 64) throw new Error(`${alg} backend produced a ${sig.length}-byte signature`);
      return alg === 'ES256' ? lowS(sig) : sig;
    },
  };
  return Object.freeze(key);
}
