/**
 * PROTOCOL.md §5 step 1's key: resolved by the grant's `issuer` + `keyId` from Trust Bundles, else
 * from the authority's JWKS, else from `signingKeyPem` (the spec's key fallback). A human-agent
 * grant's key is its DID's own, trusted by `trustedHumans` or a bundle (§10).
 */
import type { CtlCrypto, PublicJwk } from '../crypto/types.js';
import type { PolicyGrant } from '../artifacts/types.js';
import type { VerifyCtlOptions } from './options.js';
import { createBundleKeys } from './bundle-keys.js';
import { createJwksKeys } from './jwks-keys.js';
import { featureOf, viaModule, type VerifierFeatures } from './features.js';
import { fail } from '../errors.js';
import { hostEnv } from '../host.js';
import { passUnsupported } from '../crypto/algorithm-support.js';
import { remember } from '../crypto/cache.js';

/** The verifier's clock and time options, each read once per verification (PROTOCOL.md §12). */
export interface VerifyTimes {
  now: number;
  tol: number;
  revocationTtl: number;
  revocationTimeoutMs: number;
  jwksTtl: number;
}

export interface GrantKey {
  /** No key at all is `undefined` (the caller's `grant_signature_invalid`). */
  jwk: PublicJwk | undefined;
  /** The newest `issuedAt` of a live bundle that vouched for this grant's issuer. */
  bundleIssuedAt: number | undefined;
}

export interface GrantKeys {
  resolve(grant: PolicyGrant, o: VerifyCtlOptions, t: VerifyTimes): Promise<GrantKey>;
  /** What every bundle that passed its root check revoked (bundle-keys.ts). */
  readonly kept: ReadonlySet<string>;
}

/** @example const { jwk } = await createGrantKeys(c, builtIn).resolve(grant, options, times) */
export function createGrantKeys(c: CtlCrypto, builtIn: VerifierFeatures): GrantKeys {
  const bundles = createBundleKeys(c);
  const keyFromJwks = createJwksKeys(builtIn);
  const didKeys = new Map<string, PublicJwk>();

  async function resolve(grant: PolicyGrant, o: VerifyCtlOptions, t: VerifyTimes): Promise<GrantKey> {
    const { now, tol } = t;
    if (grant.profile === 'human-agent') {
      // PROTOCOL.md §10: the key is the DID's own (no JWKS, no PEM); trust is trustedHumans or a bundle.
      const humanAgent = featureOf(builtIn, 'humanAgent', 'a human-agent grant needs its did:key resolved');
      const didJwk =
        didKeys.get(grant.issuer) ??
        remember(didKeys, grant.issuer, await viaModule(() => humanAgent.didKeyToJwk(grant.issuer)), 256);
      const listed = Array.isArray(o.trustedHumans) && o.trustedHumans.includes(grant.issuer);
      let bundleIssuedAt: number | undefined;
      if (o.trustBundles?.length) {
        const r = await bundles.keyFromBundles(grant, o, now, tol, { jwk: didJwk, listed });
        bundleIssuedAt = r.newestIssuedAt;
      } else if (!listed) fail('issuer_not_trusted', `${grant.issuer} is in neither trustedHumans nor a trust bundle`);
      return { jwk: didJwk, bundleIssuedAt };
    }
    if (o.trustBundles?.length) {
      const r = await bundles.keyFromBundles(grant, o, now, tol);
      return { jwk: r.jwk, bundleIssuedAt: r.newestIssuedAt };
    }
    if (o.jwks || o.jwksUrl)
      return { jwk: await keyFromJwks(grant, o, now, t.jwksTtl, t.revocationTimeoutMs), bundleIssuedAt: undefined };
    const pem = o.signingKeyPem ?? hostEnv('CTL_SBA_SIGNING_PUBLIC_KEY_PEM');
    if (!pem) return { jwk: undefined, bundleIssuedAt: undefined };
    try {
      return { jwk: (await c.importVerifyingKey(pem)).publicJwk, bundleIssuedAt: undefined };
    } catch (e) {
      passUnsupported(e);
      return fail('grant_signature_invalid', 'signingKeyPem is not a usable public key');
    }
  }

  return { resolve, kept: bundles.kept };
}
