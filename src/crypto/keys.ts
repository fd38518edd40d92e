/**
 * Key import in every form the spec allows (§2.8 and §5: "PEM private key, or a CryptoKey"; JWKs
 * from JWKS and Trust Bundles, PROTOCOL.md §3): PKCS#8 / SPKI PEM, JWK (public, or private with
 * `d`), raw bytes, a WebCrypto CryptoKey, or an already imported key. Written once over any
 * backend, so the default facade and the edge one behave alike. No noble here.
 */
import { CtlError } from '../errors.js';
import { hostSubtle } from '../host.js';
import { createLru } from './cache.js';
import { parsePkcs8, parseSpki, pem, pemBody, spki } from './der.js';
import { checkPublicJwk, checkRawPublic, jwkAlg, jwkKey, privateJwk, type CheckedPublicKey } from './jwk.js';
import { p256ScalarOk } from './strict.js';
import { subtleSigner } from './subtle-backend.js';
import type { Backend } from './backend.js';
import type { Alg, ImportOptions, PrivateKeyInput, PublicJwk, PublicKeyInput, SigningKey, VerifyingKey } from './types.js';

const bad = (what: string): never => {
  throw new CtlError('malformed', `key: ${what}`);
};

/** The key operations of a facade, bound to one backend. */
export interface KeyImporter {
  importSigningKey(input: PrivateKeyInput, options?: ImportOptions): Promise<SigningKey>;
  importVerifyingKey(input: PublicKeyInput | PrivateKeyInput, options?: ImportOptions): Promise<VerifyingKey>;
  verifyWithJwk(jwk: PublicJwk, message: Uint8Array, signature: Uint8Array): Promise<boolean>;
  toPublicJwk(input: PublicKeyInput | PrivateKeyInput, options?: ImportOptions): Promise<PublicJwk>;
}

export interface ImporterOptions {
  /** The public JWK of a non-extractable private CryptoKey, where the host can tell (node:crypto's KeyObject.from). */
  publicOfCryptoKey?: (key: CryptoKey) => unknown;
  /** Cache size (verifying keys only: private keys are never kept in a shared map). */
  cacheSize?: number;
}

function isCryptoKey(v: unknown): v is CryptoKey {
  // Duck-typed: the global CryptoKey class is a host object (ARCHITECTURE.md rule 2).
  const k = v as CryptoKey;
  return !!k && typeof k === 'object' && typeof k.type === 'string' && typeof k.extractable === 'boolean' && !!k.algorithm && Array.isArray(k.usages);
}

function cryptoKeyAlg(key: CryptoKey): Alg {
  const a = key.algorithm as { name?: string; namedCurve?: string };
  if (a.name === 'Ed25519') return 'EdDSA';
  if (a.name === 'ECDSA' && a.namedCurve === 'P-256') return 'ES256';
  return bad('CryptoKey is not Ed25519 or ECDSA P-256');
}

function isKey(v: unknown, kind: 'signing' | 'verifying'): boolean {
  return !!v && typeof v === 'object' && (v as { kind?: unknown }).kind === kind && typeof (v as any)[kind === 'signing' ? 'sign' : 'verify'] === 'function';
}

function subtleOrBad(): SubtleCrypto {
  return hostSubtle() ?? bad('a CryptoKey needs WebCrypto');
}

/** SPKI PEM of a public JWK. @example publicKeyPemFromJwk({ kty: 'OKP', crv: 'Ed25519', x }) // '-----BEGIN PUBLIC KEY-----\n...' */
export function publicKeyPemFromJwk(jwk: PublicJwk): string {
  const c = checkPublicJwk(jwk);
  return pem('PUBLIC KEY', spki(c.alg, c.raw));
}

/**
 * The key operations over a backend (resolved lazily, as the default facade probes the host once).
 * @example const k = createKeyImporter(() => backend); await k.importVerifyingKey(pem)
 */
export function createKeyImporter(backend: () => Backend | Promise<Backend>, opts: ImporterOptions = {}): KeyImporter {
  const cache = createLru<string, VerifyingKey>(opts.cacheSize ?? 256);

  /** A private input as raw scalar/seed plus the public key its container claimed. */
  async function privateParts(input: unknown, options?: ImportOptions): Promise<{ alg: Alg; d: Uint8Array; claimed?: CheckedPublicKey }> {
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
    } else if (isCryptoKey(input)) {
      if (!input.extractable) bad('non-extractable CryptoKey has no raw form');
      parts = privateJwk(await subtleOrBad().exportKey('jwk', input));
    } else {
      parts = privateJwk(input);
    }
    if (parts.alg === 'ES256' && !p256ScalarOk(parts.d)) bad('P-256 private scalar out of range');
    return parts.claimed ? { alg: parts.alg, d: parts.d, claimed: parts.claimed } : { alg: parts.alg, d: parts.d };
  }

  /** A non-extractable private CryptoKey: signs through WebCrypto itself; its public half from options or the host. */
  async function cryptoKeySigner(key: CryptoKey, options?: ImportOptions): Promise<SigningKey> {
    const alg = cryptoKeyAlg(key);
    if (key.type !== 'private' || !key.usages.includes('sign')) bad('CryptoKey is not a private key usable to sign');
    const hint = options?.publicKey ?? opts.publicOfCryptoKey?.(key);
    if (hint === undefined) bad('non-extractable CryptoKey: pass options.publicKey');
    const pub = await toPublicJwk(hint as PublicKeyInput);
    if (jwkAlg(pub) !== alg) bad('options.publicKey is not of the CryptoKey algorithm');
    const s = subtleSigner(subtleOrBad(), alg, pub, key);
    // The pair is checked once, by signing: a wrong public half would make every signature fail later.
    const probe = new Uint8Array([99, 116, 108]);
    if (!(await (await verifierFor(checkPublicJwk(pub))).verify(probe, await s.sign(probe)))) {
      bad('options.publicKey does not belong to the CryptoKey');
    }
    return s;
  }

  async function importSigningKey(input: PrivateKeyInput, options?: ImportOptions): Promise<SigningKey> {
    if (isKey(input, 'signing')) return input as SigningKey;
    if (isKey(input, 'verifying')) bad('a verifying key cannot sign');
    if (isCryptoKey(input)) {
      cryptoKeyAlg(input);
      if (input.type !== 'private') bad('CryptoKey is not a private key');
      if (!input.extractable) return cryptoKeySigner(input, options);
    }
    const { alg, d, claimed } = await privateParts(input, options);
    if (claimed && claimed.alg !== alg) bad('public key of another algorithm');
    return (await backend()).signerFor(alg, d, claimed?.jwk);
  }

  async function verifierFor(c: CheckedPublicKey, pemText?: string): Promise<VerifyingKey> {
    const b = await backend();
    const k = `${b.name}|${jwkKey(c.jwk)}`;
    let v = cache.get(k);
    if (!v) {
      v = await b.verifierFromJwk(c.jwk);
      cache.set(k, v);
    }
    if (pemText !== undefined) cache.set(`${b.name}|${pemText}`, v);
    return v;
  }

  /** Any input to a checked public key (private forms give their public half). */
  async function checkedPublic(input: unknown, options?: ImportOptions): Promise<CheckedPublicKey> {
    if (isKey(input, 'verifying') || isKey(input, 'signing')) return checkPublicJwk((input as VerifyingKey).publicJwk);
    if (input instanceof Uint8Array) return checkRawPublic(options?.alg ?? 'EdDSA', input);
    if (typeof input === 'string') {
      const { label, der } = pemBody(input);
      if (label === 'PUBLIC KEY') {
        const k = parseSpki(der);
        return checkRawPublic(k.alg, k.key);
      }
    } else if (isCryptoKey(input)) {
      cryptoKeyAlg(input);
      if (input.type === 'public') {
        const j = input.extractable ? await subtleOrBad().exportKey('jwk', input) : opts.publicOfCryptoKey?.(input);
        return checkPublicJwk(j ?? bad('non-extractable public CryptoKey'));
      }
      if (!input.extractable) return checkPublicJwk((await cryptoKeySigner(input, options)).publicJwk);
    } else if (input && typeof input === 'object' && (input as { x?: unknown }).x !== undefined) {
      return checkPublicJwk(input); // public JWK, or private JWK whose public members we read
    }
    return checkPublicJwk((await importSigningKey(input as PrivateKeyInput, options)).publicJwk);
  }

  async function importVerifyingKey(input: PublicKeyInput | PrivateKeyInput, options?: ImportOptions): Promise<VerifyingKey> {
    if (isKey(input, 'verifying')) return input as VerifyingKey;
    if (typeof input === 'string') {
      const b = await backend();
      const hit = cache.get(`${b.name}|${input}`);
      if (hit) return hit;
      return verifierFor(await checkedPublic(input, options), input);
    }
    // A JWK seen before is found by its members, without re-running the on-curve check:
    // verifiers resolve the same actorKey for every SBA of a grant. The cheap member rules
    // (kty/crv/alg agree, y exactly where it belongs) still run, so a hit is never looser.
    const j = input as Partial<PublicJwk> | null;
    if (j && typeof j === 'object' && typeof j.x === 'string' && !(input instanceof Uint8Array) && !isCryptoKey(input) && (jwkAlg(j) === 'EdDSA' ? j.y === undefined : typeof j.y === 'string')) {
      const b = await backend();
      const hit = cache.get(`${b.name}|${jwkKey(j as PublicJwk)}`);
      if (hit) return hit;
    }
    return verifierFor(await checkedPublic(input, options));
  }

  async function toPublicJwk(input: PublicKeyInput | PrivateKeyInput, options?: ImportOptions): Promise<PublicJwk> {
    return { ...(await checkedPublic(input, options)).jwk };
  }

  async function verifyWithJwk(jwk: PublicJwk, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
    try {
      return await (await importVerifyingKey(jwk)).verify(message, signature);
    } catch {
      return false; // a defective key is a refusal, never an exception (types.ts CtlCrypto)
    }
  }

  return { importSigningKey, importVerifyingKey, verifyWithJwk, toPublicJwk };
}

