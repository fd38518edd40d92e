/** The artifacts of PROTOCOL.md §4, as JSON values. Money is a decimal string on the wire. */
import type { PublicJwk, PublishedJwk } from '../crypto/types.js';
import type { WindowPeriod } from './windows.js';

export interface Asset {
  standard: string;
  code: string;
}

export interface Velocity {
  maxPaymentsPerHour?: number;
  maxAmountPerMerchantPerDay?: string;
}

/** At most `maxAmountMinor` (and `maxPayments`) in each fixed window of `every` (PROTOCOL.md §13). */
export interface BudgetWindow {
  every: WindowPeriod;
  maxAmountMinor: string;
  maxPayments?: number;
}

/** How much an offline verifier may accept on a grant before it must go online (PROTOCOL.md §8). */
export interface OfflineAllowance {
  maxAmountMinor?: string;
  maxPayments?: number;
  maxBundleAgeMs?: number;
}

export interface PolicyGrant {
  version: 1;
  grantId: string;
  policyHash: string;
  issuer: string;
  keyId: string;
  issuedAt: string;
  expiresAt: string;
  allowedRails: string[];
  allowedAssets: Asset[];
  allowedPurposes?: string[];
  maxAmountMinor: string;
  currency: string;
  destinationAllowlist?: string[];
  revocationUrl: string;
  actorKey: PublicJwk;
  velocity?: Velocity;
  offline?: OfflineAllowance;
  /** Budgets per hour, day, week, month or year beside the lifetime ceiling (PROTOCOL.md §13). */
  windows?: BudgetWindow[];
  /** Where window 0 starts; default `issuedAt`. */
  windowsStart?: string;
  /** `human-agent`: issued by a person's did:key (PROTOCOL.md §10); absent for the other profiles. */
  profile?: 'human-agent';
  /** How many signed delegations may hang below this grant (PROTOCOL.md §14); absent: none. */
  delegation?: { maxDepth: number };
  signature: string;
}

/**
 * A sub-grant (`ctl-delegation/1`, PROTOCOL.md §14), signed by its parent's `actorKey`; `keyId` is
 * that key's RFC 7638 thumbprint. It only narrows its parent: never more, longer or wider.
 */
export interface Delegation {
  version: 1;
  delegationId: string;
  /** The full signed parent: the root PolicyGrant or another delegation. */
  parent: PolicyGrant | Delegation;
  actorKey: PublicJwk;
  maxAmountMinor: string;
  issuedAt: string;
  expiresAt: string;
  allowedPurposes?: string[];
  allowedRails?: string[];
  allowedAssets?: Asset[];
  destinationAllowlist?: string[];
  windows?: BudgetWindow[];
  windowsStart?: string;
  keyId: string;
  signature: string;
}

/** A human's signed revocation of a grant they issued (`ctl-revocation/1`, PROTOCOL.md §10). */
export interface SignedRevocation {
  version: 1;
  grantId: string;
  /** The human's did:key, the grant's issuer. */
  issuer: string;
  /** `<did>#<multibase>`. */
  keyId: string;
  issuedAt: string;
  signature: string;
}

export type BudgetScope = 'SESSION' | 'TRIP';

export interface Authorization {
  budgetId: string;
  sessionId: string;
  actorId: string;
  grantId: string;
  policyHash: string;
  currency: string;
  maxAmountMinor: string;
  allowedRails: string[];
  allowedAssets: Asset[];
  destinationAllowlist: string[];
  budgetScope: BudgetScope;
  issuedAt: string;
  expiresAt: string;
  rail?: string;
  merchantId?: string;
  purpose?: string;
  intentHash?: string;
  /** PROTOCOL.md §15: `maxAmountMinor` is a hold, captured later at most once. */
  capture?: 'hold';
}

/** `G`: a `Delegation` for an SBA drawn under a chain (its leaf, PROTOCOL.md §14). */
export interface SignedBudgetAuthorization<G extends PolicyGrant | Delegation = PolicyGrant> {
  version: 1;
  authorization: Authorization;
  /** The grant drawn on, or the leaf of a delegation chain (PROTOCOL.md §14). */
  grant: G;
  issuer?: string;
  keyId: string;
  signature: string;
}

export interface BundleScope {
  category?: string;
  merchant?: string;
  region?: string;
}

export interface TrustedIssuer {
  issuer: string;
  keys: PublishedJwk[];
}

export interface TrustBundle {
  version: 1;
  bundleId: string;
  sequence: number;
  issuer: string;
  keyId: string;
  issuedAt: string;
  expiresAt: string;
  scope: BundleScope;
  issuers: TrustedIssuer[];
  revokedGrants: string[];
  signature: string;
}

export interface Receipt {
  version: 1;
  receiptId: string;
  sessionId: string;
  grantId: string;
  purpose: string;
  amount: { amountMinor: string; currency: string };
  /** For a hold (PROTOCOL.md §15): the amount authorized; `amount` is what was captured. */
  authorizedAmountMinor?: string;
  merchant: string;
  paidAt: string;
  txRef: string;
  rail: string;
  sba?: SignedBudgetAuthorization;
  keyId: string;
  signature: string;
}

/** A key of a root set or a bundle key set (PROTOCOL.md §11: JWK + kid + alg). */
export type RootKey = PublicJwk & { kid: string; alg: 'EdDSA' | 'ES256' };

/** A `ctl-root/1` statement (PROTOCOL.md §11): root version n+1, signed by thresholds of versions n and n+1. */
export interface RootStatement {
  version: 1;
  rootVersion: number;
  keys: RootKey[];
  threshold: number;
  bundleKeys: RootKey[];
  issuedAt: string;
  signatures: Array<{ keyId: string; signature: string }>;
}

export interface Jwks {
  keys: PublishedJwk[];
}

/** The result shape of every verifier (ARCHITECTURE.md rule 6). */
export type Verified<T> =
  ({ valid: true } & T) | { valid: false; error: { code: import('../errors.js').CtlErrorCode; message: string } };
