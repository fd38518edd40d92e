/**
 * The public functions, bound to the default crypto facade (native where the host has it, noble
 * otherwise). `edge.ts` binds the same code to WebCrypto only.
 */
import { defaultCrypto } from './crypto/index.js';
import {
  createGrantWith,
  signPreparedGrantWith,
  verifyGrantWith,
  type GrantFields,
  type SignGrantOptions,
  type VerifyGrantOptions,
} from './artifacts/grant.js';
import {
  createSbaWith,
  intentHashWith,
  type PaymentIntent,
  type SbaFields,
  type SignSbaOptions,
} from './artifacts/sba.js';
import {
  createBundleWith,
  verifyBundleWith,
  type BundleFields,
  type SignBundleOptions,
  type VerifyBundleOptions,
} from './artifacts/bundle.js';
import {
  signReceiptWith,
  verifyReceiptWith,
  type ReceiptFields,
  type VerifyReceiptOptions,
} from './artifacts/receipt.js';
import { createSessionWith, type SessionOptions, type WalletSession } from './wallet/session.js';
import { linkTexts } from './artifacts/chain-text.js';
import { createVerifier, type VerifyCtlOptions, type VerifyCtlResult } from './verifier/verify.js';
import type { CaptureCtl } from './verifier/capture.js';
import { humanAgentProfile } from './entries/human-agent.js';
import { onlineChecks } from './entries/online.js';
import { createExpressMiddleware, createKoaMiddleware, type MiddlewareOptions } from './verifier/middleware.js';
import { verifyDecisionWith, type DecisionOptions, type DecisionResult } from './verifier/decision.js';
import { readClock, timeOption } from './values.js';
import { hostNow } from './host.js';
import { toErrorInfo } from './errors.js';
import { walkDelegationChain } from './verifier/delegation-chain.js';
import { artifactData } from './encoding/frozen-copy.js';
import {
  chainOf,
  checkDelegation,
  type DelegationChain,
  createDelegationWith,
  type CreateDelegationOptions,
  type DelegationFields,
} from './artifacts/delegation.js';
import { createRevocationWith, verifyRevocationWith, type VerifyRevocationOptions } from './artifacts/revocation.js';
import type {
  PolicyGrant,
  Delegation,
  Receipt,
  SignedBudgetAuthorization,
  SignedRevocation,
  TrustBundle,
  Verified,
} from './artifacts/types.js';
import type { PrivateKeyInput, PublicKeyInput, SigningKey } from './crypto/types.js';

/**
 * Signs a PolicyGrant (spec §4.4). `grantId` and `issuedAt` are generated when absent.
 * @example const grant = await createSignedPolicyGrant({ policyHash, actorKey, allowedRails: ['x402'], allowedAssets:
 * [{ standard: 'iso4217', code: 'USD' }], maxAmountMinor: '5000', currency: 'USD', expiresAt }, { issuer:
 * 'authority.example', signingKey: pem })
 */
export function createSignedPolicyGrant(fields: GrantFields, options: SignGrantOptions = {}): Promise<PolicyGrant> {
  return createGrantWith(defaultCrypto, fields, options);
}

/**
 * Signs a grant prepared by an authority (the Human-Agent two-step, PROTOCOL.md §10): the object
 * is signed exactly as given, after checking it as a verifier would and that a human-agent grant
 * names this key's did:key.
 * @example const grant = await signPreparedGrant(prepared, humanKeyPem) // then POST /grants
 */
export function signPreparedGrant(prepared: unknown, signingKey: PrivateKeyInput | SigningKey): Promise<PolicyGrant> {
  return signPreparedGrantWith(defaultCrypto, prepared, signingKey);
}

/**
 * A human's signed revocation of a grant they issued (`ctl-revocation/1`, PROTOCOL.md §10), for `POST /revoke` without
 * an API key.
 * @example const revocation = await createSignedRevocation({ grantId }, { signingKey: humanKeyPem })
 */
export function createSignedRevocation(
  fields: { grantId: string; issuedAt?: string },
  options: { signingKey: PrivateKeyInput | SigningKey; now?: () => number },
): Promise<SignedRevocation> {
  return createRevocationWith(defaultCrypto, fields, options);
}

/**
 * Checks a human's revocation: shape, its DID's signature, freshness (default five minutes). Never throws. @example
 * const r = await verifySignedRevocation(body, { maxAgeMs: 300_000 })
 */
export function verifySignedRevocation(
  revocation: unknown,
  options?: VerifyRevocationOptions,
): Promise<Verified<{ revocation: SignedRevocation }>> {
  return verifyRevocationWith(defaultCrypto, revocation, options);
}

/**
 * Checks a grant on its own: shape, signature, expiry (PROTOCOL.md §5 steps 0–1). @example const r = await
 * verifyPolicyGrant(grant, { jwks })
 */
export function verifyPolicyGrant(
  grant: unknown,
  options: VerifyGrantOptions,
): Promise<Verified<{ grant: PolicyGrant }>> {
  return verifyGrantWith(defaultCrypto, grant, options);
}

/**
 * Signs an SBA drawn from `fields.grant` with the wallet key (spec §4.4); the grant's fields are copied.
 * @example const sba = await createSignedSessionBudgetAuthorization({ grant, sessionId, actorId: 'agent-1',
 * maxAmountMinor: '30' }, { signingKey })
 */
export function createSignedSessionBudgetAuthorization<G extends PolicyGrant | Delegation = PolicyGrant>(
  fields: SbaFields & { grant: G },
  options: SignSbaOptions = {},
): Promise<SignedBudgetAuthorization<G>> {
  return createSbaWith(defaultCrypto, fields, options);
}

/**
 * hex SHA-256 of JCS of one payment (PROTOCOL.md §4). @example await computeIntentHash({ amount: '30', currency: 'USD',
 * merchantId: 'm-1', rail: 'x402' })
 */
export function computeIntentHash(intent: PaymentIntent): Promise<string> {
  return intentHashWith(defaultCrypto, intent);
}

/**
 * Signs a Trust Bundle with the root key. @example await createTrustBundle({ sequence: 1, scope: { region: 'eu' },
 * issuers, revokedGrants: [], expiresAt }, { signingKey: rootPem, issuer: 'fleet.example' })
 */
export function createTrustBundle(fields: BundleFields, options: SignBundleOptions): Promise<TrustBundle> {
  return createBundleWith(defaultCrypto, fields, options);
}

/**
 * Checks a bundle against the pinned root key (PROTOCOL.md §4), or, with `rootChain`, against the
 * bundle keys of the newest root version the chain reaches from it (§11).
 * @example const r = await verifyTrustBundle(bundle, rootPem, { minSequence: 3, rootChain: statements, minRootVersion:
 * 2 })
 */
export function verifyTrustBundle(
  bundle: unknown,
  rootPublicKeyPem: PublicKeyInput,
  options?: VerifyBundleOptions,
): Promise<Verified<{ bundle: TrustBundle; rootVersion: number }>> {
  return verifyBundleWith(defaultCrypto, bundle, rootPublicKeyPem, options);
}

/** Signs a gateway receipt (spec §2.4). @example await signReceipt({ receiptId, sessionId, … }, { signingKey }) */
export function signReceipt(
  fields: ReceiptFields,
  options: { signingKey: Parameters<typeof signReceiptWith>[2]['signingKey']; keyId?: string },
): Promise<Receipt> {
  return signReceiptWith(defaultCrypto, fields, options);
}

/** Verifies a receipt with the gateway's key or JWKS. @example await verifyReceipt(receipt, { jwks }) */
export function verifyReceipt(
  receipt: unknown,
  options: VerifyReceiptOptions,
): Promise<Verified<{ receipt: Receipt }>> {
  return verifyReceiptWith(defaultCrypto, receipt, options);
}

/**
 * A wallet session under a grant (spec §2.8).
 * @example const s = createSession(grant, { actorId: 'vehicle-42', signingKey: pem, ceiling: { amount: '5000',
 * currency: 'USD' } }); const sba = await s.createSba({ amount: '30', currency: 'USD', rail: 'x402' })
 */
export function createSession<G extends PolicyGrant | Delegation = PolicyGrant>(
  grant: G | string,
  options: SessionOptions,
): WalletSession<G> {
  return createSessionWith<G>(defaultCrypto, grant, options);
}

/**
 * Checks a delegation chain on its own (PROTOCOL.md §14): shape, each link's signature by its
 * parent's `actorKey`, narrowing, depth, times. Not the root grant's signature: the caller holds
 * that grant (an authority compares it with its own) or verifies it with `verifyPolicyGrant`. Never throws.
 * @example const r = await verifyDelegation(body.delegation); if (r.valid) console.log(r.root.grantId)
 */
export async function verifyDelegation(
  input: unknown,
  options: { now?: () => number; clockToleranceMs?: number } = {},
): Promise<Verified<DelegationChain>> {
  try {
    const d = artifactData(input);
    checkDelegation(d);
    const now = readClock(options?.now ?? hostNow, 'options.now');
    const tol = timeOption(options?.clockToleranceMs, 'options.clockToleranceMs', 0);
    const chain = chainOf(d);
    await walkDelegationChain(defaultCrypto, chain, linkTexts(chain), now, tol);
    return { valid: true, ...chain };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}

/**
 * A sub-grant (`ctl-delegation/1`, PROTOCOL.md §14) under `parent` (a PolicyGrant or a delegation),
 * signed by the parent's `actorKey`; it only narrows (else `CtlError('delegation_invalid')` naming
 * the member). The holder of `fields.actorKey` opens a session with it as with a grant.
 * @example
 * const d = await createDelegation(grant, { actorKey: subJwk, maxAmountMinor: '2000', expiresAt }, { signingKey })
 */
export function createDelegation(
  parent: PolicyGrant | Delegation,
  fields: DelegationFields,
  options: CreateDelegationOptions,
): Promise<Delegation> {
  return createDelegationWith(defaultCrypto, parent, fields, options);
}

/**
 * The merchant verifier (spec §4.4, PROTOCOL.md §5). Never throws.
 * @example const r = await verifyCtl(sba, { amount: '30', currency: 'USD', merchantId: 'm-1', jwksUrl }); if (!r.valid)
 * console.log(r.error.code)
 */
const defaultVerifier = /* @__PURE__ */ createVerifier(defaultCrypto, {
  humanAgent: humanAgentProfile,
  online: onlineChecks,
});
export const verifyCtl: (sba: unknown, options: VerifyCtlOptions) => Promise<VerifyCtlResult> = defaultVerifier;

/**
 * Captures a hold that `verifyCtl` (or the decision verifier) accepted (PROTOCOL.md §15): at most
 * the hold, once, before the SBA expires; the rest goes back to every counter. The hold is named by
 * the result's `holdId` (or the SBA) and found in `spendStorage`, the storage the verification
 * used. Never throws.
 * @example const r = await captureCtl(v.holdId, '1234', { spendStorage }); if (!r.captured) console.log(r.error.code)
 */
export const captureCtl: CaptureCtl = (hold, amount, options) => defaultVerifier.captureCtl!(hold, amount, options);

/**
 * Express/Connect middleware: verifies the SBA of `Authorization: CTL …` or `body.sba`, sets
 * `req.ctl` (typed on Express's `Request`) or answers 402 `{ error }`. Defaults: `trackSpend`
 * off (turn it on to refuse replays and keep cumulative spend), revocation answers cached
 * `revocationTtl` = 60 000 ms, JWKS cached `jwksTtl` = 300 000 ms.
 * @example app.post('/pay', ctl({ amount: '30', currency: 'USD', jwksUrl, trackSpend: true }), (req, res) => res.json({
 * grantId: req.ctl?.grant.grantId }))
 */
export function ctl(options: MiddlewareOptions<any>) {
  return createExpressMiddleware(defaultVerifier, options);
}

/**
 * Koa middleware: as `ctl()`, setting `ctx.state.ctl`; the same defaults (`trackSpend` off,
 * `revocationTtl` 60 000 ms, `jwksTtl` 300 000 ms).
 * @example router.post('/pay', ctlKoa({ amount: '30', currency: 'USD', jwksUrl, trackSpend: true }), (ctx) => {
 * ctx.body = ctx.state.ctl })
 */
export function ctlKoa(options: MiddlewareOptions<any>) {
  return createKoaMiddleware(defaultVerifier, options);
}

/**
 * The spec's decision-bound check: the SBA verifies and agrees with an ALLOW decision.
 * @example const r = await verifySignedSessionBudgetAuthorizationForDecision(sba, { sessionId, decision, trustBundles,
 * rootPublicKeyPem, cumulativeSpentMinor: '0' })
 */
export function verifySignedSessionBudgetAuthorizationForDecision(
  sba: unknown,
  options: DecisionOptions,
): Promise<DecisionResult> {
  return verifyDecisionWith(verifyCtl, sba, options);
}
