/**
 * The crypto facade of `dist/edge.js`: WebCrypto only, nothing from @noble, and small (an edge
 * runtime loads it per cold start). Public keys go through the same code and the same strict checks
 * (PROTOCOL.md §3) as the default facade (public-keys.ts, backend.ts); private keys, which an
 * edge verifier rarely holds, are parsed by WebCrypto itself rather than by der.ts's PKCS#8
 * reader (~0.8 KB gzip less). So on edge a private key is whatever PKCS#8 / JWK the runtime's
 * WebCrypto accepts for Ed25519 or P-256, a private JWK must carry its public members, and every
 * imported private key is checked against its public half by signing once (public-keys.ts).
 */
import { hostSubtle } from '../host.js';
import { base64urlEncode } from '../encoding/base64url.js';
import { utf8Encode } from '../encoding/utf8.js';
import { pemBody, pkcs8 } from './der.js';
import { badKey as bad, jwkAlg, thumbprintInput, thumbprintMembers } from './jwk.js';
import { createPublicKeyImporter, isCryptoKey, isKey, signerFromCryptoKey } from './public-keys.js';
import { createSubtleBackend, createSubtleVerifyBackend, webAlg } from './subtle-backend.js';
import { randomBytes } from './random.js';
import type { Backend, VerifyBackend } from './backend.js';
import type { CtlCrypto, ImportOptions, PrivateKeyInput, SigningKey } from './types.js';

const subtle = (): SubtleCrypto =>
  hostSubtle() ??
  (() => {
    throw new Error('edge crypto needs WebCrypto (crypto.subtle)');
  })();
let backend: Backend | undefined;
const subtleBackend = (): Backend => (backend ??= createSubtleBackend(subtle()));

/** PKCS#8 PEM, private JWK or raw 32 bytes into a CryptoKey, WebCrypto doing the parsing. */
async function toCryptoKey(input: unknown, options?: ImportOptions): Promise<CryptoKey> {
  const tryImport = (format: 'pkcs8' | 'jwk', data: any, alg: 'EdDSA' | 'ES256') =>
    subtle()
      .importKey(format as 'pkcs8', data, webAlg(alg), true, ['sign'])
      .catch(() => undefined);
  if (typeof input === 'string') {
    const { label, der } = pemBody(input);
    if (label !== 'PRIVATE KEY') bad(`expected a PKCS#8 "PRIVATE KEY" PEM, got "${label}"`);
    return (
      (await tryImport('pkcs8', der, 'EdDSA')) ??
      (await tryImport('pkcs8', der, 'ES256')) ??
      bad('not an Ed25519 or P-256 PKCS#8 key')
    );
  }
  if (input instanceof Uint8Array) {
    const alg = options?.alg ?? 'EdDSA';
    return (input.length === 32 && (await tryImport('pkcs8', pkcs8(alg, input), alg))) || bad(`raw ${alg} private key`);
  }
  const j = input as JsonWebKey;
  return (
    (typeof j?.d === 'string' && (await tryImport('jwk', j, jwkAlg(j)))) || bad('not a private Ed25519 or P-256 JWK')
  );
}

async function importSigningKey(input: PrivateKeyInput, options?: ImportOptions): Promise<SigningKey> {
  if (isKey(input, 'signing')) return input as SigningKey;
  if (isKey(input, 'verifying')) bad('a verifying key cannot sign');
  return signerFromCryptoKey(keys, isCryptoKey(input) ? input : await toCryptoKey(input, options), options);
}

const keys = /* @__PURE__ */ createPublicKeyImporter({ backend: subtleBackend, importSigningKey });

/** WebCrypto SHA-256. @example await edgeCrypto.sha256(bytes) */
const sha256 = (data: Uint8Array) => subtleBackend().sha256(data);

/** RFC 7638 thumbprint over a facade's SHA-256. */
const thumbprintWith =
  (sha: (d: Uint8Array) => Promise<Uint8Array>): CtlCrypto['jwkThumbprint'] =>
  async (jwk) =>
    base64urlEncode(await sha(utf8Encode(thumbprintInput(thumbprintMembers(jwk)))));

/**
 * The WebCrypto-only facade. @example const key = await edgeCrypto.importVerifyingKey(jwk); await key.verify(msg, sig)
 */
export const edgeCrypto: CtlCrypto = {
  importSigningKey,
  importVerifyingKey: keys.importVerifyingKey,
  verifyWithJwk: keys.verifyWithJwk,
  toPublicJwk: keys.toPublicJwk,
  sha256,
  jwkThumbprint: thumbprintWith(sha256),
  randomBytes,
};

/**
 * `edgeCrypto` without private keys, for `dist/edge.js`, whose verifier never signs: a private key
 * given where a public one is expected is refused, as in `ctl/verify` (crypto/index.ts
 * createVerifyOnlyCrypto), and the bundle carries no private-key import.
 */
export function createEdgeVerifyCrypto(): CtlCrypto {
  const refuse = async (): Promise<never> => bad('ctl/edge verifies only: private keys need ctl/wallet or ctl');
  let b: VerifyBackend | undefined;
  const backend = () => (b ??= createSubtleVerifyBackend(subtle()));
  const k = createPublicKeyImporter({ backend, importSigningKey: refuse });
  const sha256 = (data: Uint8Array) => backend().sha256(data);
  return {
    importSigningKey: refuse,
    importVerifyingKey: k.importVerifyingKey,
    verifyWithJwk: k.verifyWithJwk,
    toPublicJwk: k.toPublicJwk,
    sha256,
    jwkThumbprint: thumbprintWith(sha256),
    // Nothing a verifier does draws randomness; the edge build has no source to offer.
    randomBytes: () => bad('ctl/edge verifies only: no randomness'),
  };
}
