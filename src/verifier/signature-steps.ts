/**
 * PROTOCOL.md §5 steps 1 and 2, and the walk of a delegation chain between them (§14): the grant's
 * signature with its key resolved by issuer + keyId, its times; each link; then the SBA's
 * signature against the key recorded in the grant (the leaf's), its times.
 */
import type { CtlCrypto, PublicJwk } from '../crypto/types.js';
import type { PolicyGrant } from '../artifacts/types.js';
import type { VerifyCtlOptions } from './options.js';
import type { KnownGrantText, PresentedSba } from './presented-sba.js';
import { createGrantKeys, type VerifyTimes } from './grant-key.js';
import { walkDelegationChain, type LinkSignatureCache } from './delegation-chain.js';
import type { VerifierFeatures } from './features.js';
import { sbaSignedText } from '../artifacts/sba.js';
import { verifyArtifactSignature, verifySignedText } from '../artifacts/signing.js';
import { fail } from '../errors.js';
import { parseStrictJson, sameCanonical } from '../encoding/jcs.js';
import { utf8Encode } from '../encoding/utf8.js';
import { checkWindow } from '../values.js';
import { remember } from '../crypto/cache.js';

export interface SignatureSteps {
  knownGrantText: KnownGrantText;
  /** Step 1: returns the newest `issuedAt` of a live bundle that vouched for the grant's issuer. */
  verifyGrant(p: PresentedSba, o: VerifyCtlOptions, t: VerifyTimes): Promise<number | undefined>;
  /** PROTOCOL.md §14, after step 1: each link of the chain. */
  verifyChain(p: PresentedSba, t: VerifyTimes): Promise<void>;
  /** Step 2. */
  verifySba(p: PresentedSba, t: VerifyTimes): Promise<void>;
  /** What every bundle that passed its root check revoked (bundle-keys.ts), for step 3. */
  readonly keptRevoked: ReadonlySet<string>;
}

/** @example const steps = createSignatureSteps(c, builtIn); await steps.verifyGrant(p, options, times) */
export function createSignatureSteps(c: CtlCrypto, builtIn: VerifierFeatures): SignatureSteps {
  /**
   * By grant signature; only grants that passed `checkSba` get here, so `jcs` is a checked text,
   * and `value` the data parsed from it (what a later grant is matched against, by value).
   */
  const grantChecked = new Map<string, { jcs: string; value: unknown; keyId: string; ok: boolean }>();
  const keys = createGrantKeys(c, builtIn);
  const linkSignatures: LinkSignatureCache = new Map();

  /**
   * Matched by value to the data of the canonical text it had then (equal by value is equal by
   * bytes; the walk goes no further than that data, so a hostile object graph cannot make it long).
   */
  function knownGrantText(g: unknown): string | undefined {
    const signature = (g as { signature?: unknown } | null)?.signature;
    const seen = typeof signature === 'string' ? grantChecked.get(signature) : undefined;
    return seen && sameCanonical(g, seen.value) ? seen.jcs : undefined;
  }

  /**
   * One signature check per grant and key. Looked up by the grant's signature, then confirmed on
   * the full canonical text and the key (a forged grant reusing a signature is a different entry),
   * so no long string is hashed per payment.
   */
  async function grantSignatureOk(grant: PolicyGrant, grantJcs: string, jwk: PublicJwk): Promise<boolean> {
    const keyId = `${jwk.kty}:${jwk.crv}:${jwk.x}:${jwk.y ?? ''}`;
    const hit = grantChecked.get(grant.signature);
    if (hit && hit.jcs === grantJcs && hit.keyId === keyId) return hit.ok;
    const ok = await verifyArtifactSignature(c, 'grant', grant as unknown as Record<string, unknown>, jwk);
    remember(grantChecked, grant.signature, { jcs: grantJcs, value: parseStrictJson(grantJcs), keyId, ok });
    return ok;
  }

  async function verifyGrant(p: PresentedSba, o: VerifyCtlOptions, t: VerifyTimes): Promise<number | undefined> {
    const grant = p.chain.root;
    const { jwk, bundleIssuedAt } = await keys.resolve(grant, o, t);
    if (!jwk)
      fail('grant_signature_invalid', 'no key to verify the grant: pass trustBundles, jwks/jwksUrl or signingKeyPem');
    if (!(await grantSignatureOk(grant, p.grantJcs, jwk!)))
      fail('grant_signature_invalid', 'the grant signature does not verify');
    checkWindow(grant, 'grant', 'grant', 'grant_expired', t.now, t.tol);
    return bundleIssuedAt;
  }

  async function verifyChain(p: PresentedSba, t: VerifyTimes): Promise<void> {
    if (p.chain.links.length > 0) await walkDelegationChain(c, p.chain, p.links, t.now, t.tol, linkSignatures);
  }

  async function verifySba(p: PresentedSba, t: VerifyTimes): Promise<void> {
    const { sba } = p;
    // Always against the key recorded in the grant, over the grant text the SBA signed.
    const msg = utf8Encode(sbaSignedText(sba, p.sbaGrantJcs));
    if (!(await verifySignedText(c, msg, sba.signature, sba.grant.actorKey)))
      fail('sba_signature_invalid', 'the SBA is not signed by the grant actorKey');
    checkWindow(sba.authorization, 'SBA', 'authorization', 'sba_expired', t.now, t.tol);
  }

  return { knownGrantText, verifyGrant, verifyChain, verifySba, keptRevoked: keys.kept };
}
