/**
 * PolicyGrant (`ctl-grant/1`, PROTOCOL.md §4): build, sign, parse. Key resolution and the
 * verification order live in the verifier; this module knows the grant's shape and bytes.
 */
import type { CtlCrypto, PrivateKeyInput, PublicJwk, PublicKeyInput, SigningKey } from '../crypto/types.js';
import type { Jwks, PolicyGrant, Verified } from './types.js';
import {
  amount,
  arrayOf,
  asset,
  bad,
  checkShape,
  checkTimeOrder,
  checkVersion,
  counter,
  currency,
  hash,
  identifier,
  issuer,
  keyIdentifier,
  object,
  printable,
  purposePattern,
  rail,
  signature,
  str,
  thumbprintJwk,
  timestamp,
  url,
  version,
  type Check,
  type Shape,
} from './schema.js';
import { didKeyFromJwk, didKeyToJwk, didKeyUrl, isDidKey } from '../encoding/did-key.js';
import { checkWindowRules, windows } from './windows.js';
import { checkWindow, formatTimestamp, isIdentifier, readClock, timeOption } from '../values.js';
import { signArtifact, verifyArtifactSignature } from './signing.js';
import { findKey } from './keys.js';
import { toErrorInfo, malformed, fail } from '../errors.js';
import { parseStrictJson } from '../encoding/jcs.js';
import { hostEnv, hostNow } from '../host.js';
import { newId } from '../ids.js';
import { passUnsupported } from '../crypto/algorithm-support.js';

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

/** `delegation.maxDepth`: 1–4 links below the root grant (PROTOCOL.md §14). */
const delegationDepth: Check = (v, f) => {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 4) bad(f, 'must be an integer from 1 to 4');
};

const grantShape: Shape = {
  version: [true, version],
  grantId: [true, identifier],
  policyHash: [true, hash],
  issuer: [true, issuer],
  keyId: [true, keyIdentifier],
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
  windows: [false, windows],
  windowsStart: [false, timestamp],
  profile: [false, str(/^human-agent$/, '"human-agent"')],
  delegation: [false, object({ maxDepth: [true, delegationDepth] })],
  signature: [true, signature],
};

/** Structure and value rules of a grant, in place; throws `CtlError` (`malformed`, `unsupported_version`). */
export function checkGrant(value: unknown, field = 'grant'): asserts value is PolicyGrant {
  // Checked every time, never remembered per object: an object checked once can be edited in
  // place afterwards (PROTOCOL.md §12). The check costs a few microseconds.
  checkVersion(value, field);
  checkShape(value, field, grantShape);
  // PROTOCOL.md §10: a human-issued grant names its key by the DID itself; any other grant by a plain kid.
  if (value['profile'] === 'human-agent') {
    if (!isDidKey(value['issuer']))
      bad(`${field}.issuer`, 'must be the did:key of the human under profile "human-agent"');
    if (value['keyId'] !== didKeyUrl(value['issuer'] as string))
      bad(`${field}.keyId`, 'must be the did:key URL <did>#<multibase> of the issuer');
  } else if (!isIdentifier(value['keyId'])) bad(`${field}.keyId`, 'must be an identifier [A-Za-z0-9._:-]{1,128}');
  checkTimeOrder(value, field);
  checkWindowRules(value, field);
}

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
export type GrantFields = Omit<
  PolicyGrant,
  'version' | 'issuer' | 'keyId' | 'signature' | 'grantId' | 'issuedAt' | 'revocationUrl' | 'actorKey'
> & {
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

export async function createGrantWith(
  c: CtlCrypto,
  fields: GrantFields,
  options: SignGrantOptions = {},
): Promise<PolicyGrant> {
  if (!fields || typeof fields !== 'object') throw new TypeError('createSignedPolicyGrant: fields must be an object');
  const human = fields.profile === 'human-agent';
  // A human's key never comes from the authority's environment (PROTOCOL.md §10).
  const signingKey = options.signingKey ?? (human ? undefined : hostEnv('CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM'));
  if (!signingKey)
    throw new TypeError(
      'createSignedPolicyGrant: options.signingKey is required (or CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM)',
    );
  const signer = await c.importSigningKey(signingKey);
  let iss: string | undefined;
  let keyId: string;
  if (human) {
    // The issuer is the signing key's own did:key, and its keyId the DID URL: nothing to configure.
    iss = didKeyFromJwk(signer.publicJwk);
    keyId = didKeyUrl(iss);
    if (
      (options.issuer !== undefined && options.issuer !== iss) ||
      (options.keyId !== undefined && options.keyId !== keyId)
    ) {
      throw new RangeError(`createSignedPolicyGrant: a human-agent grant is issued by the signing key's DID ${iss}`);
    }
  } else {
    iss = options.issuer ?? hostEnv('CTL_ISSUER_DOMAIN');
    if (!iss) throw new TypeError('createSignedPolicyGrant: options.issuer is required (or CTL_ISSUER_DOMAIN)');
    keyId = options.keyId ?? hostEnv('CTL_POLICY_GRANT_SIGNING_KEY_ID') ?? (await c.jwkThumbprint(signer.publicJwk));
  }
  const grantId = fields.grantId ?? newId('grant_');
  let revocationUrl = fields.revocationUrl;
  if (revocationUrl === undefined) {
    const base = options.revocationBaseUrl ?? hostEnv('CTL_REVOCATION_BASE_URL');
    if (!base)
      throw new TypeError(
        'createSignedPolicyGrant: fields.revocationUrl or options.revocationBaseUrl (or CTL_REVOCATION_BASE_URL) ' +
          'is required',
      );
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
    windows: fields.windows,
    windowsStart: fields.windowsStart,
    profile: fields.profile,
    delegation: fields.delegation,
  };
  for (const k of Object.keys(unsigned)) if (unsigned[k] === undefined) delete unsigned[k];
  // Refuse to sign anything a verifier would refuse to read.
  checkGrant({ ...unsigned, signature: 'A'.repeat(86) }, 'grant');
  return (await signArtifact(c, 'grant', unsigned, signer)) as unknown as PolicyGrant;
}

/**
 * Signs a grant exactly as prepared by someone else (the authority's two-step human grant:
 * it fixes `grantId`, `revocationUrl` and `issuedAt`, the human signs the final object). Every
 * member is checked as a verifier would read it; a human-agent grant must name the signing
 * key's own DID. Throws `CtlError('malformed')` or `RangeError` (wrong key).
 */
export async function signPreparedGrantWith(
  c: CtlCrypto,
  prepared: unknown,
  signingKey: PrivateKeyInput | SigningKey,
): Promise<PolicyGrant> {
  if (!prepared || typeof prepared !== 'object')
    throw new TypeError('signPreparedGrant: prepared must be a grant without its signature');
  const { signature: _drop, ...unsigned } = prepared as Record<string, unknown>;
  checkGrant({ ...unsigned, signature: 'A'.repeat(86) }, 'grant');
  const signer = await c.importSigningKey(signingKey);
  if (unsigned['profile'] === 'human-agent' && unsigned['issuer'] !== didKeyFromJwk(signer.publicJwk)) {
    throw new RangeError(
      `signPreparedGrant: the grant is issued by ${String(unsigned['issuer'])}, not by this key's DID`,
    );
  }
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
export async function verifyGrantWith(
  c: CtlCrypto,
  input: unknown,
  options: VerifyGrantOptions,
): Promise<Verified<{ grant: PolicyGrant }>> {
  try {
    const grant = parseGrant(input);
    // Time is a number or nothing (PROTOCOL.md §12).
    const now = readClock(options?.now ?? hostNow, 'options.now');
    const tol = timeOption(options?.clockToleranceMs, 'options.clockToleranceMs', 0);
    let key: PublicJwk;
    // A human's grant is self-certifying (PROTOCOL.md §10): its key is its DID. Whether to trust
    // that human is the verifier's question (`trustedHumans`, bundles), not this check's.
    if (grant.profile === 'human-agent') key = didKeyToJwk(grant.issuer);
    else if (options?.jwks) key = findKey(options.jwks.keys, grant.keyId, 'grant');
    else if (options?.publicKey) {
      try {
        key = (await c.importVerifyingKey(options.publicKey)).publicJwk;
      } catch (e) {
        passUnsupported(e);
        malformed('publicKey is not a usable public key');
      }
    } else fail('grant_signature_invalid', 'no key to verify the grant: pass publicKey or jwks');
    if (!(await verifyArtifactSignature(c, 'grant', grant as unknown as Record<string, unknown>, key))) {
      fail('grant_signature_invalid', 'the grant signature does not verify');
    }
    checkWindow(grant, 'grant', 'grant', 'grant_expired', now, tol);
    return { valid: true, grant };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}
