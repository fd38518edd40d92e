/**
 * Key import for the default facade, in every form the spec allows (§2.8 and §5: "PEM private
 * key, or a CryptoKey"; JWKs from JWKS and Trust Bundles, PROTOCOL.md §3): PKCS#8 / SPKI PEM,
 * JWK (public, or private with `d`), raw bytes, a WebCrypto CryptoKey, or an imported key.
 * Private keys are parsed here (der.ts) and handed to the backend as raw scalars; public ones go
 * through public-keys.ts, which the edge facade shares. No noble here.
 */
import { parsePkcs8, pem, pemBody, spki } from './der.js';
import { badKey as bad, checkPublicJwk, checkRawPublic, privateJwk, type CheckedPublicKey } from './jwk.js';
import { createPublicKeyImporter, isCryptoKey, isKey, signerFromCryptoKey } from './public-keys.js';
import { p256ScalarOk } from './strict.js';
import type { Backend } from './backend.js';
import type { Alg, CtlCrypto, ImportOptions, PrivateKeyInput, PublicJwk, SigningKey } from './types.js';

/** The key operations of a facade, bound to one backend. */
export type KeyImporter = Pick<CtlCrypto, 'importSigningKey' | 'importVerifyingKey' | 'verifyWithJwk' | 'toPublicJwk'>;

export interface ImporterOptions {
  /** The public JWK of a non-extractable private CryptoKey, where the host can tell (node:crypto's KeyObject.from). */
  publicOfCryptoKey?: (key: CryptoKey) => unknown;
  /** Cache size (verifying keys only: private keys are never kept in a shared map). */
  cacheSize?: number;
}

/**
 * SPKI PEM of a public JWK. @example publicKeyPemFromJwk({ kty: 'OKP', crv: 'Ed25519', x }) // '-----BEGIN PUBLIC
 * KEY-----\n...'
 */
export function publicKeyPemFromJwk(jwk: PublicJwk): string {
  const c = checkPublicJwk(jwk);
  return pem('PUBLIC KEY', spki(c.alg, c.raw));
}

/** A private input (not a CryptoKey) as raw scalar/seed plus the public key its container claimed. */
function privateParts(
  input: unknown,
  options?: ImportOptions,
): { alg: Alg; d: Uint8Array; claimed?: CheckedPublicKey | undefined } {
  let parts: { alg: Alg; d: Uint8Array; claimed?: CheckedPublicKey | undefined };
  if (typeof input === 'string') {
    const { label, der } = pemBody(input);
    if (label !== 'PRIVATE KEY') bad(`expected a PKCS#8 "PRIVATE KEY" PEM, got "${label}"`);
    const k = parsePkcs8(der);
    parts = { alg: k.alg, d: k.d, claimed: k.pub && checkRawPublic(k.alg, k.pub) };
  } else if (input instanceof Uint8Array) {
    const alg = options?.alg ?? 'EdDSA';
    if (input.length !== 32) bad(`raw ${alg} private key must be 32 bytes`);
    parts = { alg, d: input.slice() };
  } else {
    parts = privateJwk(input);
  }
  if (parts.alg === 'ES256' && !p256ScalarOk(parts.d)) bad('P-256 private scalar out of range');
  if (parts.claimed && parts.claimed.alg !== parts.alg) bad('public key of another algorithm');
  return parts;
}

/**
 * The key operations over a backend (resolved lazily, as the default facade probes the host once).
 * @example const k = createKeyImporter(() => backend); await k.importVerifyingKey(pem)
 */
export function createKeyImporter(backend: () => Backend | Promise<Backend>, opts: ImporterOptions = {}): KeyImporter {
  async function importSigningKey(input: PrivateKeyInput, options?: ImportOptions): Promise<SigningKey> {
    if (isKey(input, 'signing')) return input as SigningKey;
    if (isKey(input, 'verifying')) bad('a verifying key cannot sign');
    if (isCryptoKey(input)) return signerFromCryptoKey(pub, input, options, opts.publicOfCryptoKey);
    const { alg, d, claimed } = privateParts(input, options);
    return (await backend()).signerFor(alg, d, claimed?.jwk);
  }
  const pub = createPublicKeyImporter({ backend, importSigningKey, ...opts });
  return {
    importSigningKey,
    importVerifyingKey: pub.importVerifyingKey,
    verifyWithJwk: pub.verifyWithJwk,
    toPublicJwk: pub.toPublicJwk,
  };
}
