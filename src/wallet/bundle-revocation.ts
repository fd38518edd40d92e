/**
 * Revocation for a wallet that signs offline (a vehicle, a meter): the grant's status is read
 * from the Trust Bundles it has installed (their `revokedGrants`, PROTOCOL.md §4), each verified
 * against the pinned root on every check, instead of asked of the grant's `revocationUrl`.
 * Fail closed (spec §3 rule 1): without a live bundle signed by the root, nothing is signed.
 */
import type { CtlCrypto, PublicKeyInput } from '../crypto/types.js';
import type { TrustBundle } from '../artifacts/types.js';
import { verifyBundleWith, type VerifyBundleOptions } from '../artifacts/bundle.js';
import { artifactData } from '../encoding/frozen-copy.js';
import { fail } from '../errors.js';
import type { RevocationStatus } from '../revocation.js';

export interface BundleRevocationOptions extends Pick<VerifyBundleOptions, 'rootChain' | 'minRootVersion'> {
  /**
   * The installed bundles (objects or JSON text), or a function that gives them: read on every
   * payment, so a bundle installed later counts at once.
   */
  trustBundles: readonly unknown[] | (() => readonly unknown[] | Promise<readonly unknown[]>);
  /** The pinned root public key the bundles must be signed by (spec §5: never taken from a bundle). */
  rootPublicKeyPem: PublicKeyInput;
}

/** Grants a root-signed bundle revoked, kept for the process (PROTOCOL.md §12: revocations are permanent). */
const revokedSeen = new Set<string>();

/**
 * Answers like the online check, or throws `revocation_unavailable`. Options missing or wrong
 * leave no live bundle: refused the same way, never "not revoked".
 */
export const bundleRevocation = (c: CtlCrypto, o: BundleRevocationOptions) => async (grantId: string, now: number): Promise<RevocationStatus> => {
  const list = typeof o.trustBundles === 'function' ? await o.trustBundles() : o.trustBundles;
  let live = false;
  for (const input of Array.isArray(list) ? list : []) {
    let own: TrustBundle;
    try {
      own = artifactData(input) as TrustBundle; // what is verified is what is read after
    } catch {
      continue;
    }
    const r = await verifyBundleWith(c, own, o.rootPublicKeyPem, { rootChain: o.rootChain, minRootVersion: o.minRootVersion, now: () => now });
    // Expiry is checked after the root signature: an expired bundle vouches for nothing, but what
    // it revoked stays revoked (PROTOCOL.md §12).
    if ((r.valid || r.error.code === 'trust_bundle_expired') && own.revokedGrants.includes(grantId)) revokedSeen.add(grantId);
    live ||= r.valid;
  }
  if (revokedSeen.has(grantId)) return { revoked: true };
  if (!live) fail('revocation_unavailable', 'no live Trust Bundle signed by revocationFromBundles.rootPublicKeyPem');
  return { revoked: false };
};
