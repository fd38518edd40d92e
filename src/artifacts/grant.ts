/**
 * PolicyGrant (`ctl-grant/1`, PROTOCOL.md §4): build, sign, parse. Key resolution and the
 * verification order live in the verifier; this module knows the grant's shape and bytes.
 */
import type { CtlCrypto, PrivateKeyInput, PublicJwk, PublicKeyInput, SigningKey } from '../crypto/types.js';
import type { Jwks, PolicyGrant, Verified } from './types.js';
import {
  amount, arrayOf, asset, bad, checkShape, checkVersion, counter, currency, hash, identifier, issuer, object,
  printable, purposePattern, rail, signature, thumbprintJwk, timestamp, url, version, type Shape,
} from './schema.js';
import { signArtifact, verifyArtifactSignature } from './signing.js';
import { findKey } from './keys.js';
import { CtlError, toErrorInfo } from '../errors.js';
import { parseStrictJson } from '../encoding/jcs.js';
import { formatTimestamp, parseTimestamp } from '../values.js';
import { hostEnv, hostNow } from '../host.js';
import { newId } from '../ids.js';

export const velocityShape: Shape = {
  maxPaymentsPerHour: [false, counter],
  maxAmountPerMerchantPerDay: [false, amount],
};

export const offlineShape: Shape = {
  maxAmountMinor: [false, amount],
  maxPayments: [false, counter],
  maxBundleAgeMs: [false, counter],
};

const destination = printable(256);

const grantShape: Shape = {
  version: [true, version],
  grantId: [true, identifier],
  policyHash: [true, hash],
  issuer: [true, issuer],
  keyId: [true, identifier],
  issuedAt: [true, timestamp],
  expiresAt: [true, timestamp],
  allowedRails: [true, arrayOf(rail, { max: 64, unique: true })],
  allowedAssets: [true, arrayOf(asset, { max: 64 })],
  allowedPurposes: [false, arrayOf(purposePattern, { max: 256, unique: true })],
  maxAmountMinor: [true, amount],
  currency: [true, currency],
  // An empty list is a defect of the grant, not "nobody" (PROTOCOL.md §5 step 5).
  destinationAllowlist: [false, arrayOf(destination, { min: 1, max: 1024, unique: true })],
  revocationUrl: [true, url],
  actorKey: [true, thumbprintJwk],
  velocity: [false, object(velocityShape)],
  offline: [false, object(offlineShape)],
  signature: [true, signature],
};

/** Structure and value rules of a grant, in place; throws `CtlError` (`malformed`, `unsupported_version`). */
export function checkGrant(value: unknown, field = 'grant'): asserts value is PolicyGrant {
  // A grant object is checked once: a wallet or gateway signs many SBAs (and receipts) with it.
  // Skipping a re-check is safe because nothing trusts the object's content without its
  // signature, which covers every member and is checked on fresh canonical bytes.
  if (typeof value === 'object' && value !== null && checkedGrants.has(value)) return;
  checkVersion(value, field);
  checkShape(value, field, grantShape);
  if (parseTimestamp(value['expiresAt'], `${field}.expiresAt`) <= parseTimestamp(value['issuedAt'], `${field}.issuedAt`)) {
    bad(`${field}.expiresAt`, 'must be after issuedAt');
  }
  checkedGrants.add(value);
}

const checkedGrants = new WeakSet<object>();

/**
 * Parses a PolicyGrant from an object or JSON text; throws `CtlError('malformed')`. The signature
 * is not checked here (that needs the issuer's key): use `verifyPolicyGrant` or `verifyCtl`.
 * @example const grant = parseGrant(await res.text())
 */
export function parseGrant(input: unknown): PolicyGrant {
  const value = typeof input === 'string' ? parseStrictJson(input) : input;
  checkGrant(value);
  return value;
}

/**
 * Every grant field but `version`, `issuer`, `keyId` and `signature` (spec §2.3, PROTOCOL.md §4);
 * `grantId`, `issuedAt` and `revocationUrl` may be left to the signer, and `actorKey` may be any
 * public JWK or PEM (stored as its thumbprint members).
 */
export type GrantFields = Omit<PolicyGrant, 'version' | 'issuer' | 'keyId' | 'signature' | 'grantId' | 'issuedAt' | 'revocationUrl' | 'actorKey'> & {
  grantId?: string;
  issuedAt?: string;
  revocationUrl?: string;
  actorKey: PublicKeyInput;
};

export interface SignGrantOptions {
  /** Defaults to `CTL_ISSUER_DOMAIN` where the host has an environment. */
  issuer?: string;
  /** Defaults to `CTL_POLICY_GRANT_SIGNING_KEY_ID`, else the signing key's RFC 7638 thumbprint. */
  keyId?: string;
  /** Defaults to `CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM`. */
  signingKey?: PrivateKeyInput | SigningKey;
  /** Base of the revocation URL; defaults to `CTL_REVOCATION_BASE_URL`. */
  revocationBaseUrl?: string;
  now?: () => number;
}

export async function createGrantWith(c: CtlCrypto, fields: GrantFields, options: SignGrantOptions = {}): Promise<PolicyGrant> {
  if (!fields || typeof fields !== 'object') throw new TypeError('createSignedPolicyGrant: fields must be an object');
  const signingKey = options.signingKey ?? hostEnv('CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM');
  if (!signingKey) throw new TypeError('createSignedPolicyGrant: options.signingKey is required (or CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM)');
  const iss = options.issuer ?? hostEnv('CTL_ISSUER_DOMAIN');
  if (!iss) throw new TypeError('createSignedPolicyGrant: options.issuer is required (or CTL_ISSUER_DOMAIN)');
  const signer = await c.importSigningKey(signingKey);
  const keyId = options.keyId ?? hostEnv('CTL_POLICY_GRANT_SIGNING_KEY_ID') ?? (await c.jwkThumbprint(signer.publicJwk));
  const grantId = fields.grantId ?? newId('grant_');
  let revocationUrl = fields.revocationUrl;
  if (revocationUrl === undefined) {
    const base = options.revocationBaseUrl ?? hostEnv('CTL_REVOCATION_BASE_URL');
    if (!base) throw new TypeError('createSignedPolicyGrant: fields.revocationUrl or options.revocationBaseUrl (or CTL_REVOCATION_BASE_URL) is required');
    revocationUrl = `${base.replace(/\/+$/, '')}/revoke?grantId=${encodeURIComponent(grantId)}`;
  }
  let actorKey;
  try {
    actorKey = await c.toPublicJwk(fields.actorKey as PublicKeyInput);
  } catch {
    bad('actorKey', 'must be a public key (JWK or PEM) for Ed25519 or P-256');
  }
  const unsigned: Record<string, unknown> = {
    version: 1,
    grantId,
    policyHash: fields.policyHash,
    issuer: iss,
    keyId,
    issuedAt: fields.issuedAt ?? formatTimestamp((options.now ?? hostNow)()),
    expiresAt: fields.expiresAt,
    allowedRails: fields.allowedRails,
    allowedAssets: fields.allowedAssets,
    allowedPurposes: fields.allowedPurposes,
    maxAmountMinor: fields.maxAmountMinor,
    currency: fields.currency,
    destinationAllowlist: fields.destinationAllowlist,
    revocationUrl,
    actorKey,
    velocity: fields.velocity,
    offline: fields.offline,
  };
  for (const k of Object.keys(unsigned)) if (unsigned[k] === undefined) delete unsigned[k];
  // Refuse to sign anything a verifier would refuse to read.
  checkGrant({ ...unsigned, signature: 'A'.repeat(86) }, 'grant');
  return (await signArtifact(c, 'grant', unsigned, signer)) as unknown as PolicyGrant;
}

export interface VerifyGrantOptions {
  /** The authority's grant key (PEM or JWK)… */
  publicKey?: PublicKeyInput;
  /** …or its JWKS, the key picked by `grant.keyId` with the `grant` purpose. */
  jwks?: Jwks;
  now?: () => number;
  clockToleranceMs?: number;
}

/**
 * A grant on its own (PROTOCOL.md §5 steps 0–1): shape, signature, expiry, `issuedAt`. For a wallet
 * that wants to check what it was handed before using it. Never throws.
 */
export async function verifyGrantWith(c: CtlCrypto, input: unknown, options: VerifyGrantOptions): Promise<Verified<{ grant: PolicyGrant }>> {
  try {
    const grant = parseGrant(input);
    let key: PublicJwk;
    if (options?.jwks) key = findKey(options.jwks.keys, grant.keyId, 'grant');
    else if (options?.publicKey) {
      try {
        key = (await c.importVerifyingKey(options.publicKey)).publicJwk;
      } catch {
        throw new CtlError('malformed', 'publicKey is not a usable public key');
      }
    } else throw new CtlError('grant_signature_invalid', 'no key to verify the grant: pass publicKey or jwks');
    if (!(await verifyArtifactSignature(c, 'grant', grant as unknown as Record<string, unknown>, key))) {
      throw new CtlError('grant_signature_invalid', 'the grant signature does not verify');
    }
    const now = (options.now ?? hostNow)();
    const tol = options.clockToleranceMs ?? 0;
    if (now >= parseTimestamp(grant.expiresAt, 'grant.expiresAt') + tol) throw new CtlError('grant_expired', `the grant expired at ${grant.expiresAt}`);
    if (parseTimestamp(grant.issuedAt, 'grant.issuedAt') > now + tol) throw new CtlError('not_yet_valid', 'the grant is issued in the future');
    return { valid: true, grant };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}
