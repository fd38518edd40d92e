/**
 * The one interface every crypto backend implements (ARCHITECTURE.md: src/crypto).
 * Algorithms come from keys, never from artifacts (PROTOCOL.md §3).
 */
export type Alg = 'EdDSA' | 'ES256';

/** What a key may sign (PROTOCOL.md §3). */
export type KeyPurpose = 'grant' | 'sba' | 'bundle' | 'receipt' | 'webhook';

/** The RFC 7638 thumbprint members of a public key: exactly what `grant.actorKey` holds. */
export interface PublicJwk {
  kty: 'OKP' | 'EC';
  crv: 'Ed25519' | 'P-256';
  x: string;
  y?: string;
}

/** A public key as published in a JWKS or a Trust Bundle (PROTOCOL.md §3, §4). */
export interface PublishedJwk extends PublicJwk {
  kid: string;
  alg: Alg;
  purposes: KeyPurpose[];
  status?: 'active' | 'retired';
}

/**
 * Anything that holds a private key: PKCS#8 PEM, a private JWK (`d`), raw bytes, a CryptoKey, or an imported
 * SigningKey.
 */
export type PrivateKeyInput = string | JsonWebKey | Uint8Array | CryptoKey | SigningKey;

/** Anything that holds a public key: SPKI PEM, a public JWK, raw bytes, a CryptoKey, or an imported VerifyingKey. */
export type PublicKeyInput = string | JsonWebKey | PublicJwk | Uint8Array | CryptoKey | VerifyingKey;

export interface ImportOptions {
  /** Needed only for raw bytes, where the encoding does not say; defaults to `EdDSA`. */
  alg?: Alg;
  /**
   * The public half of a non-extractable private CryptoKey, on hosts that cannot derive it
   * (browsers: WebCrypto cannot read a public key out of a private one). Checked by signing once.
   */
  publicKey?: PublicKeyInput;
}

/** A private key ready to sign. Ed25519 signatures are 64 bytes; ES256 ones are raw r‖s, 64 bytes, low-S. */
export interface SigningKey {
  readonly kind: 'signing';
  readonly alg: Alg;
  readonly publicJwk: PublicJwk;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

/** A public key ready to verify. `verify` is strict (PROTOCOL.md §3) and never throws: any defect is `false`. */
export interface VerifyingKey {
  readonly kind: 'verifying';
  readonly alg: Alg;
  readonly publicJwk: PublicJwk;
  verify(message: Uint8Array, signature: Uint8Array): Promise<boolean>;
}

export interface GeneratedKeyPair {
  privateKeyPem: string;
  publicKeyPem: string;
  publicJwk: PublicJwk;
}

/** A backend: `native` (node:crypto or WebCrypto) or `noble` (pure JS, works everywhere). */
export interface CryptoBackend {
  readonly name: 'native' | 'noble';
  /** Ed25519 from a 32-byte seed, P-256 from a 32-byte scalar. */
  signerFromRaw(alg: Alg, privateKey: Uint8Array, publicJwk: PublicJwk): Promise<SigningKey>;
  /** Public key from its JWK (already validated by the caller's strict checks). */
  verifierFromJwk(jwk: PublicJwk): Promise<VerifyingKey>;
  sha256(data: Uint8Array): Promise<Uint8Array>;
}

/**
 * The crypto facade the artifacts, wallet and verifier are written against. `src/crypto/index.ts`
 * gives the default one (native when the host has it, noble otherwise); `src/crypto/edge.ts` gives a
 * WebCrypto-only one for `dist/edge.js`, which carries no noble.
 */
export interface CtlCrypto {
  importSigningKey(input: PrivateKeyInput, options?: ImportOptions): Promise<SigningKey>;
  /** Throws `CtlError('malformed')` for a key that is not a valid public key under PROTOCOL.md §3's strict rules. */
  importVerifyingKey(input: PublicKeyInput, options?: ImportOptions): Promise<VerifyingKey>;
  /**
   * Verifies with a JWK, importing it once (cached). `false` for any defect of key or signature; throws only
   * `unsupported_algorithm` (no backend for the key's algorithm).
   */
  verifyWithJwk(jwk: PublicJwk, message: Uint8Array, signature: Uint8Array): Promise<boolean>;
  sha256(data: Uint8Array): Promise<Uint8Array>;
  /** RFC 7638 thumbprint, base64url without padding. */
  jwkThumbprint(jwk: PublicJwk): Promise<string>;
  /** The thumbprint members of any public (or private) key input. */
  toPublicJwk(input: PublicKeyInput | PrivateKeyInput, options?: ImportOptions): Promise<PublicJwk>;
  randomBytes(n: number): Uint8Array;
}
