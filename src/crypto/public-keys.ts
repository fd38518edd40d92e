/**
 * Public key import, shared by the default facade and the edge one (so keep it lean: it is in
 * `dist/edge.js`): SPKI PEM, JWK, raw bytes, CryptoKey or an imported key, checked under
 * PROTOCOL.md §3 and cached, so a verifier checking many SBAs under one key imports it once.
 * Also the CryptoKey signer both facades use. No noble here.
 */
import { hostSubtle, isCryptoKey } from '../host.js';
import { createLru } from './cache.js';
import { parseSpki, pemBody } from './der.js';
import { badKey as bad, checkPublicJwk, checkRawPublic, jwkAlg, jwkKey, type CheckedPublicKey } from './jwk.js';
import { subtleSigner } from './subtle-backend.js';
import type { VerifyBackend } from './backend.js';
import type {
  Alg,
  CtlCrypto,
  ImportOptions,
  PrivateKeyInput,
  PublicJwk,
  PublicKeyInput,
  SigningKey,
  VerifyingKey,
} from './types.js';
import { passUnsupported } from './algorithm-support.js';

export { isCryptoKey };

/** An imported SigningKey / VerifyingKey (pass-through inputs). @example isKey(key, 'signing') */
export function isKey(v: unknown, kind: 'signing' | 'verifying'): boolean {
  return (
    !!v &&
    typeof v === 'object' &&
    (v as { kind?: unknown }).kind === kind &&
    typeof (v as any)[kind === 'signing' ? 'sign' : 'verify'] === 'function'
  );
}

function cryptoKeyAlg(key: CryptoKey): Alg {
  const a = key.algorithm as { name?: string; namedCurve?: string };
  return a.name === 'Ed25519'
    ? 'EdDSA'
    : a.name === 'ECDSA' && a.namedCurve === 'P-256'
      ? 'ES256'
      : bad('CryptoKey is not Ed25519 or ECDSA P-256');
}

/** The host's WebCrypto, which any CryptoKey implies. @example subtle().exportKey('jwk', key) */
export function subtle(): SubtleCrypto {
  return hostSubtle() ?? bad('a CryptoKey needs WebCrypto');
}

export interface PublicImporterOptions {
  backend: () => VerifyBackend | Promise<VerifyBackend>;
  /** The facade's private import: a private input's public half is its signer's. */
  importSigningKey: CtlCrypto['importSigningKey'];
  /** The public JWK of a non-extractable CryptoKey, where the host can tell (node:crypto's KeyObject.from). */
  publicOfCryptoKey?: (key: CryptoKey) => unknown;
  /** Cache size (verifying keys only: private keys are never kept in a shared map). */
  cacheSize?: number;
}

export type PublicKeyImporter = ReturnType<typeof createPublicKeyImporter>;

/**
 * Public key operations over a backend (`signerFromCryptoKey` builds the facades' CryptoKey signer on them).
 * @example const k = createPublicKeyImporter({ backend: () => b, importSigningKey }); await k.importVerifyingKey(pem)
 */
export function createPublicKeyImporter(o: PublicImporterOptions) {
  const cache = createLru<string, VerifyingKey>(o.cacheSize ?? 256);

  async function verifierFor(c: CheckedPublicKey, pemText?: string): Promise<VerifyingKey> {
    const b = await o.backend();
    const k = `${b.name}|${jwkKey(c.jwk)}`;
    let v = cache.get(k);
    if (!v) cache.set(k, (v = await b.verifierFromJwk(c.jwk)));
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
        const j = input.extractable ? await subtle().exportKey('jwk', input) : o.publicOfCryptoKey?.(input);
        return checkPublicJwk(j ?? bad('non-extractable public CryptoKey'));
      }
    } else if (input && typeof input === 'object' && (input as { x?: unknown }).x !== undefined) {
      return checkPublicJwk(input); // public JWK, or private JWK whose public members we read
    }
    return checkPublicJwk((await o.importSigningKey(input as PrivateKeyInput, options)).publicJwk);
  }

  async function importVerifyingKey(
    input: PublicKeyInput | PrivateKeyInput,
    options?: ImportOptions,
  ): Promise<VerifyingKey> {
    if (isKey(input, 'verifying')) return input as VerifyingKey;
    const b = await o.backend();
    if (typeof input === 'string')
      return cache.get(`${b.name}|${input}`) ?? verifierFor(await checkedPublic(input), input);
    // A JWK seen before is found by its members, without re-running the on-curve check:
    // verifiers resolve the same actorKey for every SBA of a grant. The cheap member rules
    // (kty/crv/alg agree, y exactly where it belongs) still run, so a hit is never looser.
    const j = input as { x?: unknown; y?: unknown } | null;
    const hit =
      j &&
      typeof j === 'object' &&
      typeof j.x === 'string' &&
      !(input instanceof Uint8Array) &&
      !isCryptoKey(input) &&
      (jwkAlg(j) === 'EdDSA' ? j.y === undefined : typeof j.y === 'string')
        ? cache.get(`${b.name}|${jwkKey(j as never)}`)
        : undefined;
    return hit ?? verifierFor(await checkedPublic(input, options));
  }

  return {
    importVerifyingKey,
    checkedPublic,
    verifierFor,
    /** The thumbprint members of any key input. */
    async toPublicJwk(input: PublicKeyInput | PrivateKeyInput, options?: ImportOptions): Promise<PublicJwk> {
      return { ...(await checkedPublic(input, options)).jwk };
    },
    /** `false` for any defect of key or signature; throws only `unsupported_algorithm` (types.ts CtlCrypto). */
    async verifyWithJwk(jwk: PublicJwk, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
      try {
        return await (await importVerifyingKey(jwk)).verify(message, signature);
      } catch (e) {
        passUnsupported(e);
        return false;
      }
    },
  };
}

/**
 * A private CryptoKey, signing through WebCrypto itself (extractable or not): the private import
 * of the signing facades, apart so a verify-only build does not carry it. Its public half comes
 * from the key when extractable, else from `options.publicKey` or the host, and is checked once
 * by signing (a JWK import may carry an `x` that is not `d`'s).
 */
export async function signerFromCryptoKey(
  k: PublicKeyImporter,
  key: CryptoKey,
  options?: ImportOptions,
  publicOfCryptoKey?: (key: CryptoKey) => unknown,
): Promise<SigningKey> {
  const alg = cryptoKeyAlg(key);
  if (key.type !== 'private' || !key.usages.includes('sign')) bad('CryptoKey is not a private key usable to sign');
  const hint = key.extractable
    ? await subtle().exportKey('jwk', key)
    : (options?.publicKey ?? publicOfCryptoKey?.(key));
  const pub = await k.checkedPublic(hint ?? bad('non-extractable CryptoKey: pass options.publicKey'));
  if (pub.alg !== alg) bad('options.publicKey is not of the CryptoKey algorithm');
  const s = subtleSigner(subtle(), alg, pub.jwk, key);
  const probe = new Uint8Array([99, 116, 108]);
  if (!(await (await k.verifierFor(pub)).verify(probe, await s.sign(probe)))) {
    bad('the public key does not belong to the CryptoKey');
  }
  return s;
}
