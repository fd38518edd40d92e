/**
 * What `verifyCtl` takes and answers (spec §4.4, PROTOCOL.md §5): its options, each time option a
 * number or nothing (§12), and a result that is `{ valid: true, ... }` or `{ valid: false, error }`.
 */
import type { PublicKeyInput } from '../crypto/types.js';
import type { Asset, Delegation, Jwks, PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import type { CtlErrorInfo } from '../errors.js';
import type { RevocationSource } from '../revocation-source.js';
import type { FetchLike } from '../net/fetch-json.js';
import type { CaptureCtl } from './capture.js';
import type { SpendStorage } from '../wallet/spend-storage.js';
import type { TimeFloor } from './time-floor.js';

export interface VerifyCtlOptions {
  /** The payment in front of the merchant, minor units. */
  amount: string;
  currency: string;
  /** This merchant, checked against the grant's destinationAllowlist. */
  merchantId?: string;
  rail?: string;
  purpose?: string;
  asset?: Asset;
  /** Trust Bundles to resolve the authority's key from, checked against `rootPublicKeyPem`. */
  trustBundles?: unknown[];
  rootPublicKeyPem?: PublicKeyInput;
  /**
   * The root chain (PROTOCOL.md §11: `ctl-root/1` statements from version 2 up), walked from
   * `rootPublicKeyPem`: bundles are then accepted only when signed by a `bundleKeys` key of the
   * newest version (a bundle of an older root is `trust_bundle_invalid`); a broken chain is
   * `root_rotation_invalid`.
   */
  rootChain?: unknown[];
  /** The highest root version accepted before (persisted by the caller): a chain ending below it is `root_rollback`. */
  minRootVersion?: number;
  /**
   * The root chain this verifier accepted before (persisted by the caller, as `verifyRootChain`'s
   * `accepted`): `rootChain` must repeat it statement for statement before adding any, else
   * `root_rotation_invalid`. A chain that arrived with a bundle is never trusted as accepted: walked
   * from the pin alone, a fork signed by a retired root key that has leaked would pass.
   */
  acceptedRootChain?: unknown[];
  /** The authority's JWKS, given or fetched from `jwksUrl` (cached for `jwksTtl` ms, default 300 000). */
  jwks?: Jwks;
  jwksUrl?: string;
  jwksTtl?: number;
  /**
   * The authority's grant key (spec §4.4 key fallback; `CTL_SBA_SIGNING_PUBLIC_KEY_PEM` where the host has an
   * environment).
   */
  signingKeyPem?: PublicKeyInput;
  /**
   * No network at all: revocation comes from the bundles' `revokedGrants` only, `grant.offline`
   * limits apply, and every `budgetId` accepted is recorded whatever `trackSpend` says (PROTOCOL.md
   * §12: offline means replay-tracked), in `spendStorage` or, without one, in this verifier's memory.
   */
  offline?: boolean;
  /**
   * Grant ids revoked by bundles accepted before (persisted by the caller): refused as
   * `grant_revoked` even when no bundle given now lists them. A verifier keeps in memory the
   * revocations of every bundle that passed its root check (PROTOCOL.md §12); this carries them
   * across restarts.
   */
  keptRevocations?: ReadonlySet<string> | readonly string[];
  /**
   * Where revocation is read instead of the grant's `revocationUrl` (PROTOCOL.md §5 step 3): the
   * host's source, e.g. a chain's revocation tokens (`revocationTokenCallData`), asked for every
   * id of the chain, cached `revocationTtl`; a source that throws is `revocation_unavailable`.
   * Bundles' revocations still apply; asked even with `offline` (the host chose the source).
   */
  revocationSource?: RevocationSource;
  /** Milliseconds a revocation answer is cached (default 60 000, the spec's merchant example). */
  revocationTtl?: number;
  revocationTimeoutMs?: number;
  /**
   * Record each `budgetId` once, keep cumulative spend per grant within `maxAmountMinor`, and enforce the grant's
   * `velocity`. Default `false` online (the same SBA then verifies every time it is presented); always on with
   * `offline`.
   */
  trackSpend?: boolean;
  spendStorage?: SpendStorage;
  /**
   * Recompute `intentHash` from this payment and refuse without it (spec's Full profile; always on under a human-agent
   * grant).
   */
  requireIntentHash?: boolean;
  /**
   * did:key DIDs of the people whose human-agent grants this merchant accepts (PROTOCOL.md §10), besides
   * those a Trust Bundle lists as issuers. A DID is self-certifying, never self-trusting: without
   * either, a human-issued grant is `issuer_not_trusted`.
   */
  trustedHumans?: readonly string[];
  fetch?: FetchLike;
  now?: () => number;
  clockToleranceMs?: number;
  /**
   * The persisted time floor (PROTOCOL.md §12): every time check uses max(clock, floor); the floor
   * is raised to clock readings (at most once a minute, and on each accepted payment) and to the
   * `issuedAt` of the Trust Bundles its root signed, never to a payer's SBA or grant. An offline
   * terminal should always pass one.
   */
  timeFloor?: TimeFloor;
}

export type VerifyCtlResult =
  | {
      valid: true;
      /** The root grant (under a delegation chain, the grant the chain hangs from). */
      grant: PolicyGrant;
      /** Its `grant` is a `Delegation` when drawn under a chain (PROTOCOL.md §14). */
      sba: SignedBudgetAuthorization<PolicyGrant | Delegation>;
      amount: string;
      currency: string;
      merchantId?: string;
      /**
       * For a hold accepted with spend tracked (PROTOCOL.md §15): the name of the hold in the
       * `spendStorage`, for `captureCtl(holdId, amount, { spendStorage })`. Persist it to capture
       * after a restart.
       */
      holdId?: string;
    }
  | { valid: false; error: CtlErrorInfo };

export type VerifyCtl = ((sba: unknown, options: VerifyCtlOptions) => Promise<VerifyCtlResult>) & {
  /** Captures a hold this verifier accepted (PROTOCOL.md §15). */
  captureCtl?: CaptureCtl;
};
