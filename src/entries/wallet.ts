/**
 * `ctl/wallet` (`dist/wallet.js`, `dist/ctl-wallet.iife.js`): the signing side alone, for a
 * vehicle, a meter or an agent that only pays: a session under a grant, SBA signing, spend
 * storage, and `verifyTrustBundle` (an offline wallet takes revocation from its installed bundles).
 * No merchant verifier, no gateway client, no P-256 stack (P-256 through node:crypto or
 * WebCrypto; elsewhere `registerP256` with `ctl/p256`). See docs/sdk-api.md.
 */
export {
  CtlError,
  CtlBudgetExceededError,
  CtlGrantRevokedError,
  ERROR_CODES,
  isCtlErrorCode,
  type CtlErrorCode,
  type CtlErrorInfo,
} from '../errors.js';
export {
  createSession,
  createSignedSessionBudgetAuthorization,
  computeIntentHash,
  verifyTrustBundle,
  // Delegation (PROTOCOL.md §14): hand a sub-agent a narrower slice; revoke it with a signed revocation.
  createDelegation,
  createSignedRevocation,
} from '../api.js';
export type { DelegationFields, CreateDelegationOptions } from '../artifacts/delegation.js';
export { createSbaSigner, type SbaSigner } from '../wallet/sba-signer.js';
// A wallet that installs bundles follows the root chain they come with (PROTOCOL.md §11).
export { verifyRootChain } from '../root.js';
export type { VerifyBundleOptions } from '../artifacts/bundle.js';
export type { TrustBundle, Verified } from '../artifacts/types.js';
export { newId } from '../ids.js';
export type { SessionOptions, PaymentRequest, WalletSession } from '../wallet/session.js';
export type { WindowRemaining } from '../wallet/holds.js';
export type { SbaFields, SignSbaOptions, PaymentIntent } from '../artifacts/sba.js';
export type { PolicyGrant, Delegation, SignedBudgetAuthorization, Asset } from '../artifacts/types.js';
export {
  createMemorySpendStorage,
  type SpendStorage,
  type ReserveResult,
  type ReserveOptions,
  type SpendCounter,
  type ReserveManyOptions,
  type ReserveManyResult,
  type CommitManyResult,
} from '../wallet/spend-storage.js';
export { encodeSbaHeader, encodeSbaBase64 } from '../verifier/presentation.js';
export { signedBytes } from '../artifacts/signing.js';
export { canonicalize, parseStrictJson } from '../encoding/jcs.js';
export { policyHash } from '../encoding/policy-hash.js';
export { base64urlEncode, base64urlDecode, base64Encode, hexEncode } from '../encoding/base64url.js';
export { utf8Encode, utf8Decode } from '../encoding/utf8.js';
export { parseAmount, parseTimestamp, formatTimestamp } from '../values.js';
export {
  generateKeyPair,
  importSigningKey,
  toPublicJwk,
  jwkThumbprint,
  verifyWithJwk,
  sha256Hex,
  setRandomSource,
  setCryptoBackend,
  getCryptoBackendName,
} from '../crypto/index.js';
export { registerP256, type P256Provider } from '../crypto/algorithm-support.js';
export type { Alg, PublicJwk, PrivateKeyInput, SigningKey, GeneratedKeyPair } from '../crypto/types.js';
