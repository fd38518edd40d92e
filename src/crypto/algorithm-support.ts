/**
 * Which algorithms this build can verify (PROTOCOL.md §3, §9 `unsupported_algorithm`). Ed25519 is
 * always there; P-256 comes from the host (node:crypto, WebCrypto) or, on a host with neither
 * (QuickJS), from a pure-JS implementation the host registers explicitly:
 *
 *   import { registerP256 } from 'ctl/verify'; import { nobleP256 } from 'ctl/p256'; registerP256(nobleP256);
 *
 * So a device that only meets Ed25519 never carries a P-256 stack. An artifact whose key needs an
 * algorithm the build lacks is refused with `unsupported_algorithm`: never a throw out of a
 * verifier, never a pass.
 */
import { CtlError, fail } from '../errors.js';

/** A P-256 ECDSA implementation (SHA-256, raw r‖s signatures), as `ctl/p256` exports one. */
export interface P256Provider {
  /** The uncompressed SEC1 public key (65 bytes) of a 32-byte scalar in [1, n-1]. */
  publicKey(d: Uint8Array): Uint8Array;
  /** A 64-byte r‖s signature over SHA-256(message); low-S is applied by the caller. */
  sign(message: Uint8Array, d: Uint8Array): Uint8Array;
  /** Whether `signature` (r‖s, any S) verifies over SHA-256(message) under the SEC1 `publicKey`. */
  verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
}

let p256: P256Provider | undefined;

/**
 * Registers the pure-JS P-256 for hosts without native or WebCrypto P-256 (pass `undefined` to
 * remove it). The `native` backend never uses it.
 * @example import { nobleP256 } from 'ctl/p256'; registerP256(nobleP256)
 */
export function registerP256(provider: P256Provider | undefined): void {
  const p = provider as Partial<P256Provider> | undefined;
  if (
    p !== undefined &&
    !['publicKey', 'sign', 'verify'].every((m) => typeof p[m as keyof P256Provider] === 'function')
  ) {
    throw new TypeError(
      'registerP256(provider): an object with publicKey, sign and verify, e.g. nobleP256 from "ctl/p256"',
    );
  }
  p256 = provider;
}

/** The registered P-256, or `CtlError('unsupported_algorithm')`. @example registeredP256().verify(sig, msg, pub) */
export function registeredP256(): P256Provider {
  return p256 ?? unsupportedAlgorithm('ES256');
}

/** Throws `CtlError('unsupported_algorithm')`. @example unsupportedAlgorithm('ES256') */
export function unsupportedAlgorithm(alg: string): never {
  fail(
    'unsupported_algorithm',
    `${alg}: no backend in this build (without native P-256: registerP256(nobleP256), nobleP256 of "ctl/p256")`,
  );
}

/**
 * For the catch-alls of the verification paths (which turn any defect into a refusal): lets
 * `unsupported_algorithm` through, so a missing backend is reported as such, never as a bad
 * signature or a bad key.
 * @example try { ... } catch (e) { passUnsupported(e); return false }
 */
export function passUnsupported(e: unknown): void {
  if (e instanceof CtlError && e.code === 'unsupported_algorithm') throw e;
}
