/**
 * `dist/edge.js`: the merchant verifier for edge runtimes (Workers, Deno Deploy, Vercel Edge),
 * WebCrypto only, no noble inside. Ed25519 and P-256 (spec §4.4 `verifyCtlEdge`).
 */
import { createEdgeVerifyCrypto } from './crypto/edge.js';
import { createVerifier, type VerifyCtlOptions, type VerifyCtlResult } from './verifier/verify.js';
import { decodeSbaHeader } from './verifier/presentation.js';
import { onlineChecks } from './entries/online.js';
import { verifyBundleWith, type VerifyBundleOptions } from './artifacts/bundle.js';
import type { PublicKeyInput } from './crypto/types.js';

export type { VerifyCtlOptions, VerifyCtlResult };

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
export const verifyCtlEdge: (sba: unknown, options: VerifyCtlOptions) => Promise<VerifyCtlResult> = createVerifier(
  edgeCrypto,
  { online: onlineChecks },
);

/** As `verifyTrustBundle`, on WebCrypto. */
export function verifyTrustBundleEdge(
  bundle: unknown,
  rootPublicKeyPem: PublicKeyInput,
  options?: VerifyBundleOptions,
) {
  return verifyBundleWith(edgeCrypto, bundle, rootPublicKeyPem, options);
}
