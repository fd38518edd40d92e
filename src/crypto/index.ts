/**
 * The default crypto facade (ARCHITECTURE.md: src/crypto). `auto` picks `native` where the host
 * has node:crypto, or WebCrypto with Ed25519 (probed once, lazily), and `noble` otherwise; every
 * backend verifies under the strict rules of PROTOCOL.md §3.
 */
import { hmacSha256 as jsHmacSha256, sha256 as jsSha256 } from './sha2.js';
import { hostNodeCrypto, hostSubtle } from '../host.js';
import { base64urlEncode, hexEncode } from '../encoding/base64url.js';
import { utf8Encode } from '../encoding/utf8.js';
import { pem, pkcs8, spki } from './der.js';
import { badKey, checkPublicJwk, thumbprintInput, thumbprintMembers } from './jwk.js';
import { createPublicKeyImporter } from './public-keys.js';
import { createKeyImporter, publicKeyPemFromJwk } from './keys.js';
import { createNativeBackend } from './native.js';
import { createNobleBackend } from './noble-backend.js';
import { randomBytes, setRandomSource } from './random.js';
import { p256ScalarOk } from './strict.js';
import type { Backend } from './backend.js';
import type { Alg, CryptoBackend, CtlCrypto, GeneratedKeyPair, PublicJwk } from './types.js';

export type * from './types.js';
export { publicKeyPemFromJwk, randomBytes, setRandomSource };

export type BackendChoice = 'auto' | 'native' | 'noble';

let choice: BackendChoice = 'auto';
let nodeCryptoMemo: { nc: any } | undefined;
/** node:crypto, looked up once (sha256Sync is on the policyHash hot path). */
const nodeCrypto = (): any => (nodeCryptoMemo ??= { nc: hostNodeCrypto() }).nc;
let nobleBackend: Backend | undefined;
let nativeBackend: Backend | undefined;
let autoBackend: Promise<Backend> | undefined;
let autoName: 'native' | 'noble' | undefined;

function noble(): Backend {
  return (nobleBackend ??= createNobleBackend());
}

function native(): Backend | undefined {
  return (nativeBackend ??= createNativeBackend(nodeCrypto()));
}

// A valid Ed25519 public key (RFC 8032 test 1): WebCrypto without Ed25519 refuses to import it.
const PROBE_KEY = new Uint8Array([
  215, 90, 152, 1, 130, 177, 10, 183, 213, 75, 254, 211, 201, 100, 7, 58, 14, 225, 114, 243, 218, 166, 35, 37, 175, 2,
  26, 104, 247, 7, 81, 26,
]);

async function probeAuto(): Promise<Backend> {
  if (nodeCrypto()) return native()!;
  const subtle = hostSubtle();
  if (subtle) {
    try {
      await subtle.importKey('raw', PROBE_KEY, { name: 'Ed25519' }, true, ['verify']);
      return native()!;
    } catch {
      // WebCrypto without Ed25519 (older browsers): noble does both algorithms.
    }
  }
  return noble();
}

function currentBackend(): Backend | Promise<Backend> {
  if (choice === 'noble') return noble();
  if (choice === 'native')
    return (
      native() ?? Promise.reject(new Error('crypto backend "native": this host has neither node:crypto nor WebCrypto'))
    );
  autoBackend ??= probeAuto().then((b) => ((autoName = b.name), b));
  return autoBackend;
}

/**
 * Chooses the backend: `auto` (default), `native` or `noble`, probing the host afresh. Throws if `native` is not
 * available here.
 * @example setCryptoBackend('noble') // pure JS everywhere, e.g. to match the firmware
 */
export function setCryptoBackend(name: BackendChoice): void {
  if (name !== 'auto' && name !== 'native' && name !== 'noble')
    throw new RangeError('setCryptoBackend(name): auto, native or noble');
  // Forget what was probed: a host can change under us (tests, polyfills installed late).
  nodeCryptoMemo = undefined;
  nativeBackend = undefined;
  autoBackend = undefined;
  autoName = undefined;
  if (name === 'native' && !native())
    throw new Error('crypto backend "native": this host has neither node:crypto nor WebCrypto');
  choice = name;
}

/**
 * The backend in use: `native` or `noble`, or `auto` while a WebCrypto-only host has not been probed yet.
 * @example getCryptoBackendName() // 'native' on Node
 */
export function getCryptoBackendName(): 'native' | 'noble' | 'auto' {
  if (choice !== 'auto') return choice;
  if (autoName) return autoName;
  if (nodeCrypto()) return 'native';
  return hostSubtle() ? 'auto' : 'noble';
}

/** The backend object in use (resolving `auto`). @example (await getCryptoBackend()).name // 'native' */
export async function getCryptoBackend(): Promise<CryptoBackend> {
  return currentBackend();
}

/** The backend named, for tests and benchmarks that compare them. @example cryptoBackend('noble').name // 'noble' */
export function cryptoBackend(name: 'native' | 'noble'): CryptoBackend {
  const b = name === 'noble' ? noble() : native();
  if (!b) throw new Error('crypto backend "native": this host has neither node:crypto nor WebCrypto');
  return b;
}

const publicOfCryptoKey = (key: CryptoKey): unknown => {
  // node:crypto can read the public half of a non-extractable private CryptoKey without exporting the private one.
  const nc = nodeCrypto();
  return nc ? nc.createPublicKey(nc.KeyObject.from(key)).export({ format: 'jwk' }) : undefined;
};

const importer = /* @__PURE__ */ createKeyImporter(currentBackend, { publicOfCryptoKey });

/**
 * Imports a private key: PKCS#8 PEM, private JWK, raw 32 bytes (`alg` option), CryptoKey, or a SigningKey.
 * @example const key = await importSigningKey(pem); const sig = await key.sign(bytes)
 */
export const importSigningKey: CtlCrypto['importSigningKey'] = importer.importSigningKey;

/**
 * Imports a public key (SPKI PEM, JWK, raw bytes, CryptoKey, VerifyingKey), checked under §3; cached.
 * @example const key = await importVerifyingKey(grant.actorKey); await key.verify(bytes, sig)
 */
export const importVerifyingKey: CtlCrypto['importVerifyingKey'] = importer.importVerifyingKey;

/**
 * Verifies with a JWK, importing it once; `false` for any defect, never throws. @example await verifyWithJwk(jwk, msg,
 * sig) // true
 */
export const verifyWithJwk: CtlCrypto['verifyWithJwk'] = importer.verifyWithJwk;

/**
 * The thumbprint members of any key input. @example await toPublicJwk(pem) // { kty: 'OKP', crv: 'Ed25519', x: '...' }
 */
export const toPublicJwk: CtlCrypto['toPublicJwk'] = importer.toPublicJwk;

/**
 * SHA-256, synchronous: node:crypto where present, else our own (sha2.ts). @example
 * sha256Sync(utf8Encode('abc')).length // 32
 */
export function sha256Sync(data: Uint8Array): Uint8Array {
  const nc = nodeCrypto();
  return nc ? new Uint8Array(nc.createHash('sha256').update(data).digest()) : jsSha256(data);
}

/** SHA-256. @example await sha256(new Uint8Array()) // e3b0c442... as bytes */
export async function sha256(data: Uint8Array): Promise<Uint8Array> {
  return nodeCrypto() ? sha256Sync(data) : (await currentBackend()).sha256(data);
}

/**
 * Lowercase hex SHA-256, synchronous (PROTOCOL.md §1 hash). @example sha256HexSync(utf8Encode('abc')) // 'ba7816bf...'
 */
export function sha256HexSync(data: Uint8Array): string {
  return hexEncode(sha256Sync(data));
}

/** Lowercase hex SHA-256. @example await sha256Hex(utf8Encode('abc')) // 'ba7816bf...' */
export async function sha256Hex(data: Uint8Array): Promise<string> {
  return hexEncode(await sha256(data));
}

/** HMAC-SHA-256, synchronous (webhooks, continuation tokens). @example hmacSha256(key, data).length // 32 */
export function hmacSha256(key: Uint8Array, data: Uint8Array): Uint8Array {
  const nc = nodeCrypto();
  return nc ? new Uint8Array(nc.createHmac('sha256', key).update(data).digest()) : jsHmacSha256(key, data);
}

/**
 * RFC 7638 thumbprint, base64url (the `kid` of CTL keys). @example await jwkThumbprint(jwk) //
 * 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k'
 */
export async function jwkThumbprint(jwk: PublicJwk): Promise<string> {
  return jwkThumbprintSync(jwk);
}

/**
 * RFC 7638 thumbprint, synchronous. @example jwkThumbprintSync(jwk) // 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k'
 */
export function jwkThumbprintSync(jwk: PublicJwk): string {
  return base64urlEncode(sha256Sync(utf8Encode(thumbprintInput(thumbprintMembers(jwk)))));
}

/**
 * A fresh key pair as PKCS#8 / SPKI PEM plus the public JWK.
 * @example const { privateKeyPem, publicJwk } = await generateKeyPair({ alg: 'ES256' })
 */
export async function generateKeyPair(options: { alg?: Alg } = {}): Promise<GeneratedKeyPair> {
  const alg = options.alg ?? 'EdDSA';
  if (alg !== 'EdDSA' && alg !== 'ES256') throw new RangeError('generateKeyPair({ alg }): EdDSA or ES256');
  let d = randomBytes(32);
  while (alg === 'ES256' && !p256ScalarOk(d)) d = randomBytes(32); // rejection sampling, ~2^-32 per draw
  const publicJwk = await (await currentBackend()).publicJwkFromRaw(alg, d);
  const pub = checkPublicJwk(publicJwk).raw;
  return {
    privateKeyPem: pem('PRIVATE KEY', pkcs8(alg, d, alg === 'ES256' ? pub : undefined)),
    publicKeyPem: pem('PUBLIC KEY', spki(alg, pub)),
    publicJwk,
  };
}

/**
 * A facade bound to one backend, with its own key cache: tests and benchmarks compare backends with it.
 * @example const noble = createCtlCrypto('noble'); await noble.verifyWithJwk(jwk, msg, sig)
 */
export function createCtlCrypto(name: 'native' | 'noble'): CtlCrypto {
  const b = cryptoBackend(name) as Backend;
  const k = createKeyImporter(() => b, { publicOfCryptoKey });
  return { ...k, sha256: (d) => b.sha256(d), jwkThumbprint, randomBytes };
}

/**
 * The default facade the artifacts, wallet and verifier use. @example await defaultCrypto.verifyWithJwk(jwk, msg, sig)
 */
export const defaultCrypto: CtlCrypto = {
  importSigningKey,
  importVerifyingKey,
  verifyWithJwk,
  sha256,
  jwkThumbprint,
  toPublicJwk,
  randomBytes,
};

/**
 * The default facade (same backend choice) without private keys: what `ctl/verify` carries, so a
 * terminal's bundle holds no PKCS#8 or private-JWK reader. A private key given to it is refused.
 * @example const c = createVerifyOnlyCrypto(); await c.verifyWithJwk(jwk, msg, sig)
 */
export function createVerifyOnlyCrypto(): CtlCrypto {
  const importSigningKey = async (): Promise<never> =>
    badKey('ctl/verify verifies only: private keys need ctl/wallet or ctl');
  const k = createPublicKeyImporter({ backend: currentBackend, importSigningKey, publicOfCryptoKey });
  return {
    importSigningKey,
    importVerifyingKey: k.importVerifyingKey,
    verifyWithJwk: k.verifyWithJwk,
    toPublicJwk: k.toPublicJwk,
    sha256,
    jwkThumbprint,
    randomBytes,
  };
}
