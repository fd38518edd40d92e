/**
 * `ctl/verify` (`dist/verify.js`, `dist/ctl-verify.iife.js`): the merchant / terminal verifier
 * alone, for a charger, a kiosk or a POS that only accepts payments. No wallet, no gateway
 * client, no P-256 stack (P-256 through node:crypto or WebCrypto; elsewhere `registerP256` with
 * `ctl/p256`); the Human-Agent profile and online checks (revocation URL, JWKS URL) are opt-in
 * (`registerHumanAgent`, `registerOnlineChecks`): offline with bundles or a pinned key is the
 * default. See docs/sdk-api.md for which entry fits which device.
 */
export { CtlError, ERROR_CODES, isCtlErrorCode, type CtlErrorCode, type CtlErrorInfo } from '../errors.js';
export type { VerifyCtlOptions, VerifyCtlResult } from '../verifier/verify.js';
export type { CaptureCtl, CaptureOptions, CaptureResult } from '../verifier/capture.js';
export type { VerifyBundleOptions } from '../artifacts/bundle.js';
export type { PolicyGrant, SignedBudgetAuthorization, TrustBundle, Jwks, Asset, Verified } from '../artifacts/types.js';
export { decodeSbaHeader } from '../verifier/presentation.js';
export {
  revocationTokenId,
  revocationTokenCallData,
  parseRevocationTokenResult,
  type RevocationSource,
  type RevocationQuery,
} from '../revocation-source.js';
export {
  createMemorySpendStorage,
  type SpendStorage,
  type ReserveResult,
  type ReserveOptions,
} from '../wallet/spend-storage.js';
export { createMemoryTimeFloor, type TimeFloor } from '../verifier/time-floor.js';
export { canonicalize, parseStrictJson } from '../encoding/jcs.js';
export { policyHash } from '../encoding/policy-hash.js';
export { base64urlEncode, base64urlDecode, base64Encode, hexEncode } from '../encoding/base64url.js';
export { utf8Encode, utf8Decode } from '../encoding/utf8.js';
export { parseAmount, parseTimestamp, formatTimestamp } from '../values.js';
export { jwkThumbprint, sha256Hex, setRandomSource, setCryptoBackend, getCryptoBackendName } from '../crypto/index.js';
export { registerP256, type P256Provider } from '../crypto/algorithm-support.js';
// Opt-in modules (features.ts): the Human-Agent profile from ctl/human-agent, online checks from ctl/online.
export {
  registerHumanAgent,
  registerOnlineChecks,
  type HumanAgentSupport,
  type OnlineChecks,
} from '../verifier/features.js';
export type { Alg, PublicJwk, PublishedJwk, PublicKeyInput, VerifyingKey } from '../crypto/types.js';

// The transparency log's verifying half (docs/sdk-api.md "Transparency log"); all of it is in ctl/log.
export { verifyInclusion, verifyConsistency, leafHash, type Hash, type LogCheck } from '../log/merkle.js';
export {
  verifyCheckpointConsistency,
  parseCheckpoint,
  type Checkpoint,
  type CheckpointResult,
} from '../log/checkpoint.js';
export { parseTlogProof, logEntry, parseLogEntry, type TlogProofResult } from '../log/tlog-proof.js';
export { parseVerifierKey, type VerifierKey } from '../log/note.js';
export type { VerifyCheckpointOptions, Cosignature } from '../log/checkpoint.js';
export { verifyCheckpoint, verifyTlogProof } from '../log/api.js';

// Bound here to the verify-only facade (no private-key readers in this bundle); the same code as `ctl`'s.
import { createVerifyOnlyCrypto } from '../crypto/index.js';
import { createVerifier, type VerifyCtlOptions, type VerifyCtlResult } from '../verifier/verify.js';
import type { CaptureCtl } from '../verifier/capture.js';
import { verifyBundleWith, type VerifyBundleOptions } from '../artifacts/bundle.js';
import { verifyRootChainWith, type RootChainResult, type VerifyRootChainOptions } from '../verifier/root-chain.js';
import type { TrustBundle, Verified } from '../artifacts/types.js';
import type { PublicKeyInput } from '../crypto/types.js';

const crypto = createVerifyOnlyCrypto();

/**
 * The merchant verifier (spec §4.4, PROTOCOL.md §5), as `verifyCtl` of `ctl`. Never throws.
 * @example const r = await verifyCtl(sba, { amount: '1250', currency: 'EUR', trustBundles: [bundle], rootPublicKeyPem,
 * offline: true, trackSpend: true, timeFloor })
 */
const verifier = createVerifier(crypto);
export const verifyCtl: (sba: unknown, options: VerifyCtlOptions) => Promise<VerifyCtlResult> = verifier;

/** Captures a hold `verifyCtl` accepted (PROTOCOL.md §15), as `captureCtl` of `ctl`. Never throws. */
export const captureCtl: CaptureCtl = (hold, amount, options) => verifier.captureCtl!(hold, amount, options);

/**
 * Checks a bundle against the pinned root key, or the newest bundle keys of `rootChain` (PROTOCOL.md §4, §11). @example
 * const r = await verifyTrustBundle(bundle, rootPem, { minSequence: 3, rootChain })
 */
export function verifyTrustBundle(
  bundle: unknown,
  rootPublicKeyPem: PublicKeyInput,
  options?: VerifyBundleOptions,
): Promise<Verified<{ bundle: TrustBundle; rootVersion: number }>> {
  return verifyBundleWith(crypto, bundle, rootPublicKeyPem, options);
}

/**
 * Walks a root chain from the pinned version-1 root (PROTOCOL.md §11), as `verifyRootChain` of `ctl`. Never throws.
 * @example const r = await verifyRootChain(rootPem, statements, { minVersion: stored.rootVersion, accepted:
 * stored.statements })
 */
export function verifyRootChain(
  pinnedRootPem: PublicKeyInput,
  statements: unknown,
  options?: VerifyRootChainOptions,
): Promise<RootChainResult> {
  return verifyRootChainWith(crypto, pinnedRootPem, statements, options);
}

/**
 * A public key (SPKI PEM, JWK, raw, CryptoKey), checked under §3. @example const k = await importVerifyingKey(rootPem)
 */
export const importVerifyingKey = crypto.importVerifyingKey;

/** The thumbprint members of a public key. @example await toPublicJwk(rootPem) // { kty: 'OKP', crv: 'Ed25519', x } */
export const toPublicJwk = crypto.toPublicJwk;
