/**
 * `dist/edge.js`: the merchant verifier for edge runtimes (Workers, Deno Deploy, Vercel Edge),
 * WebCrypto only, no noble inside. Ed25519 and P-256 (spec §4.4 `verifyCtlEdge`).
 */
import { createEdgeVerifyCrypto } from './crypto/edge.js';
import { createVerifier, type VerifyCtlOptions, type VerifyCtlResult } from './verifier/verify.js';
import type { CaptureCtl, CaptureOptions, CaptureResult } from './verifier/capture.js';
import { decodeSbaHeader } from './verifier/presentation.js';
import { onlineChecks } from './entries/online.js';
import { verifyBundleWith, type VerifyBundleOptions } from './artifacts/bundle.js';
import type { PublicKeyInput } from './crypto/types.js';

export type { VerifyCtlOptions, VerifyCtlResult, CaptureCtl, CaptureOptions, CaptureResult };

// Verify-only (no private-key import), as ctl/verify: an edge verifier never signs.
const edgeCrypto = createEdgeVerifyCrypto();
export { decodeSbaHeader };
// An edge runtime has fetch and verifies online (spec §4.4); the Human-Agent profile is opt-in, as in `ctl/verify`.
export { registerHumanAgent } from './verifier/features.js';

/**
 * As `verifyCtl`, on WebCrypto. On failure answer HTTP 402 `{ error }` (spec §7).
 * @example const r = await verifyCtlEdge(decodeSbaHeader(req.headers.get('authorization')), { amount: '30', currency:
 * 'USD', jwksUrl })
 */
const verifier = createVerifier(edgeCrypto, { online: onlineChecks });
export const verifyCtlEdge: (sba: unknown, options: VerifyCtlOptions) => Promise<VerifyCtlResult> = verifier;

/**
 * Captures a hold `verifyCtlEdge` accepted (PROTOCOL.md §15), as `captureCtl` of `ctl`: named by
 * the result's `holdId` (or the SBA), on the `spendStorage` the verification used. Never throws.
 * @example const r = await captureCtl(v.holdId, '1234', { spendStorage, now }); if (!r.captured) log(r.error.code)
 */
export const captureCtl: CaptureCtl = (hold, amount, options) => verifier.captureCtl!(hold, amount, options);

/** As `verifyTrustBundle`, on WebCrypto. */
export function verifyTrustBundleEdge(
  bundle: unknown,
  rootPublicKeyPem: PublicKeyInput,
  options?: VerifyBundleOptions,
) {
  return verifyBundleWith(edgeCrypto, bundle, rootPublicKeyPem, options);
}
