/**
 * Revocation for a wallet that signs offline (a vehicle, a meter): the grant's status is read
 * from the Trust Bundles it has installed (their `revokedGrants`, PROTOCOL.md §4), each checked
 * against the pinned root, instead of asked of the grant's `revocationUrl`. Fail closed (spec §3
 * rule 1): without a live bundle signed by the root, nothing is signed.
 */
import type { CtlCrypto, PublicKeyInput } from '../crypto/types.js';
import type { VerifyBundleOptions } from '../artifacts/bundle.js';
import { createBundleCache } from '../verifier/bundle-cache.js';
import { bundleSignersWith, type BundleSigners } from '../verifier/root-chain.js';
import { parseTimestamp } from '../values.js';
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

const unavailable = () =>
  fail('revocation_unavailable', 'no live Trust Bundle signed by revocationFromBundles.rootPublicKeyPem');

/**
 * Answers like the online check, or throws `revocation_unavailable`. Options missing or wrong
 * leave no live bundle: refused the same way, never "not revoked". Each bundle's signature is
 * checked once (the verifier's bundle cache, by bytes or by a frozen copy), not per payment.
 */
export const bundleRevocation = (c: CtlCrypto, o: BundleRevocationOptions) => {
  const bundles = createBundleCache(c);
  // The signers of the root and chain as they are now (a rotation may extend the chain while the
  // session lives), remembered by their bytes as the verifier does (verify.ts signersFor).
  let signers: { id: string; keys: Promise<BundleSigners> } | undefined;
  return async (grantId: string, now: number): Promise<RevocationStatus> => {
    const list = typeof o.trustBundles === 'function' ? await o.trustBundles() : o.trustBundles;
    let keys: BundleSigners;
    try {
      const root = o.rootPublicKeyPem;
      const rootId = typeof root === 'string' ? root : JSON.stringify(await c.toPublicJwk(root));
      const id = `${rootId}\u0000${JSON.stringify(o.rootChain ?? null)}\u0000${o.minRootVersion ?? ''}`;
      if (signers?.id !== id) signers = { id, keys: bundleSignersWith(c, root, o.rootChain, o.minRootVersion) };
      keys = await signers.keys;
    } catch {
      signers = undefined; // a failure is not kept as the answer: asked again at the next payment
      return unavailable();
    }
    let live = false;
    for (const input of Array.isArray(list) ? list : []) {
      const checked = await bundles.check(input, keys);
      if (!checked?.signatureOk) continue;
      // Signed by the root: what it revoked stays revoked, live or not (PROTOCOL.md §12).
      if (checked.revoked.has(grantId)) revokedSeen.add(grantId);
      const b = checked.bundle;
      live ||=
        now < parseTimestamp(b.expiresAt, 'bundle.expiresAt') && parseTimestamp(b.issuedAt, 'bundle.issuedAt') <= now;
    }
    if (revokedSeen.has(grantId)) return { revoked: true };
    if (!live) unavailable();
    return { revoked: false };
  };
};
