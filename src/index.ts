/**
 * CTL SDK: named re-exports only (ARCHITECTURE.md). See docs/sdk-api.md for the map.
 */
export * from './errors.js';
export * from './api.js';
export type * from './artifacts/types.js';
export type { GrantFields, SignGrantOptions, VerifyGrantOptions } from './artifacts/grant.js';
export type { VerifyRevocationOptions } from './artifacts/revocation.js';
export type { SbaFields, SignSbaOptions, PaymentIntent } from './artifacts/sba.js';
export type { DelegationFields, CreateDelegationOptions } from './artifacts/delegation.js';
export { linkRevocationId } from './artifacts/link-revocation.js';
export {
  revocationTokenId,
  revocationTokenCallData,
  parseRevocationTokenResult,
  IS_REVOKED_SELECTOR,
  type RevocationSource,
  type RevocationQuery,
} from './revocation-source.js';
export type { BundleFields, SignBundleOptions, VerifyBundleOptions } from './artifacts/bundle.js';
export type { ReceiptFields, VerifyReceiptOptions } from './artifacts/receipt.js';
export type { SessionOptions, PaymentRequest, WalletSession } from './wallet/session.js';
export type { VerifyCtlOptions, VerifyCtlResult } from './verifier/verify.js';
export type { CaptureCtl, CaptureOptions, CaptureResult } from './verifier/capture.js';
export type { WindowRemaining } from './wallet/holds.js';
export type { MiddlewareOptions, CtlRequestState } from './verifier/middleware.js';
export type { Decision, DecisionOptions, DecisionResult } from './verifier/decision.js';
export { parseGrant } from './artifacts/grant.js';
export { signedBytes } from './artifacts/signing.js';
export { canonicalize, parseStrictJson } from './encoding/jcs.js';
export { policyHash } from './encoding/policy-hash.js';
export {
  base64urlEncode,
  base64urlDecode,
  base64Encode,
  base64DecodeLenient,
  hexEncode,
  hexDecode,
} from './encoding/base64url.js';
export { utf8Encode, utf8Decode } from './encoding/utf8.js';
export { didKeyToJwk, didKeyFromJwk, didKeyUrl, isDidKey } from './encoding/did-key.js';
export {
  isAmount,
  parseAmount,
  parsePaymentAmount,
  isCurrency,
  isPurpose,
  isPurposePattern,
  purposeAllowed,
  parseTimestamp,
  isTimestamp,
  formatTimestamp,
  isIdentifier,
} from './values.js';
export { newId } from './ids.js';
export { windowAt, WINDOW_PERIODS, type WindowPeriod, type WindowSpan } from './artifacts/windows.js';
export {
  generateKeyPair,
  importSigningKey,
  importVerifyingKey,
  verifyWithJwk,
  toPublicJwk,
  jwkThumbprint,
  publicKeyPemFromJwk,
  sha256,
  sha256Hex,
  randomBytes,
  setRandomSource,
  setCryptoBackend,
  getCryptoBackendName,
} from './crypto/index.js';
export type * from './crypto/types.js';
export { registerP256, type P256Provider } from './crypto/algorithm-support.js';
export {
  createMemorySpendStorage,
  type SpendStorage,
  type ReserveResult,
  type ReserveOptions,
  type SpendCounter,
  type ReserveManyOptions,
  type ReserveManyResult,
  type CommitManyResult,
} from './wallet/spend-storage.js';
// The argument checks and capture arithmetic every SpendStorage shares, for one written over a
// device's own storage (firmware-bridge/kv-spend-storage.ts) to refuse what the memory one refuses.
export { capturedAmounts, checkCounters, checkTimes } from './wallet/spend-checks.js';
export { createMemoryTimeFloor, type TimeFloor } from './verifier/time-floor.js';
export { encodeSbaHeader, encodeSbaBase64, decodeSbaHeader } from './verifier/presentation.js';
export * from './client/index.js';
export { verifyRootChain, createRootStatement } from './root.js';
export {
  checkRootStatement,
  rootSignedBytes,
  type RootStatementFields,
  type SignRootOptions,
} from './artifacts/root.js';
export type { RootChainResult, VerifyRootChainOptions } from './verifier/root-chain.js';
// The transparency log's verifying half (docs/sdk-api.md "Transparency log"); all of it is in ctl/log.
export { verifyInclusion, verifyConsistency, leafHash, type Hash, type LogCheck } from './log/merkle.js';
export {
  verifyCheckpointConsistency,
  parseCheckpoint,
  type Checkpoint,
  type CheckpointResult,
} from './log/checkpoint.js';
export { parseTlogProof, logEntry, parseLogEntry, type TlogProofResult } from './log/tlog-proof.js';
export { parseVerifierKey, type VerifierKey } from './log/note.js';
export type { VerifyCheckpointOptions, Cosignature } from './log/checkpoint.js';
export { verifyCheckpoint, verifyTlogProof } from './log/api.js';
