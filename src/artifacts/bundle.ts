/**
 * Trust Bundle (`ctl-bundle/1`, PROTOCOL.md §4): the authority's keys and revoked grants for
 * offline verifiers, signed by a root key installed on the device beforehand (spec §5: the root
 * never comes from a bundle).
 */
import type { CtlCrypto, PrivateKeyInput, PublicKeyInput, SigningKey } from '../crypto/types.js';
import type { BundleScope, TrustBundle, TrustedIssuer, Verified } from './types.js';
import {
  arrayOf,
  checkShape,
  checkTimeOrder,
  checkVersion,
  counter,
  identifier,
  issuer,
  object,
  printable,
  publishedJwk,
  signature,
  timestamp,
  version,
  type Shape,
} from './schema.js';
import { signArtifact } from './signing.js';
import { bundleSignersWith, signedByBundleKey } from '../verifier/root-chain.js';
import { toErrorInfo, fail } from '../errors.js';
import { artifactData, MAX_BUNDLE_MEMBERS } from '../encoding/frozen-copy.js';
import { checkWindow, formatTimestamp, readClock, timeOption } from '../values.js';
import { hostNow } from '../host.js';
import { newId } from '../ids.js';
import { passUnsupported } from '../crypto/algorithm-support.js';

const scopeShape: Shape = {
  category: [false, printable(128)],
  merchant: [false, printable(256)],
  region: [false, printable(128)],
};

const issuerShape: Shape = {
  issuer: [true, issuer],
  keys: [true, arrayOf(publishedJwk, { min: 1, max: 64 })],
};

const bundleShape: Shape = {
  version: [true, version],
  bundleId: [true, identifier],
  sequence: [true, counter],
  issuer: [true, issuer],
  keyId: [true, identifier],
  issuedAt: [true, timestamp],
  expiresAt: [true, timestamp],
  scope: [true, object(scopeShape)],
  issuers: [true, arrayOf(object(issuerShape), { max: 256 })],
  revokedGrants: [true, arrayOf(identifier, { max: 1_000_000 })],
  signature: [true, signature],
};

/** Structure and value rules; throws `CtlError`. */
export function checkBundle(value: unknown): asserts value is TrustBundle {
  checkVersion(value, 'bundle');
  checkShape(value, 'bundle', bundleShape);
  checkTimeOrder(value, 'bundle');
}

export interface BundleFields {
  bundleId?: string;
  sequence: number;
  scope: BundleScope;
  issuers: TrustedIssuer[];
  revokedGrants: string[];
  issuedAt?: string;
  expiresAt: string;
}

export interface SignBundleOptions {
  /** The root private key, or after a root rotation a bundle key of the newest root version (PROTOCOL.md §11). */
  signingKey: PrivateKeyInput | SigningKey;
  /** Defaults to the key's RFC 7638 thumbprint (the kid `ctl root rotate` gives bundle keys). */
  keyId?: string;
  issuer: string;
  now?: () => number;
}

export async function createBundleWith(
  c: CtlCrypto,
  fields: BundleFields,
  options: SignBundleOptions,
): Promise<TrustBundle> {
  if (!options || !options.signingKey)
    throw new TypeError('createTrustBundle: options.signingKey (the root key) is required');
  if (!options.issuer) throw new TypeError('createTrustBundle: options.issuer is required');
  const signer = await c.importSigningKey(options.signingKey);
  const unsigned: Record<string, unknown> = {
    version: 1,
    bundleId: fields.bundleId ?? newId('bndl_'),
    sequence: fields.sequence,
    issuer: options.issuer,
    keyId: options.keyId ?? (await c.jwkThumbprint(signer.publicJwk)),
    issuedAt: fields.issuedAt ?? formatTimestamp((options.now ?? hostNow)()),
    expiresAt: fields.expiresAt,
    scope: fields.scope ?? {},
    issuers: fields.issuers,
    revokedGrants: fields.revokedGrants ?? [],
  };
  checkBundle({ ...unsigned, signature: 'A'.repeat(86) });
  return (await signArtifact(c, 'bundle', unsigned, signer)) as unknown as TrustBundle;
}

export interface VerifyBundleOptions {
  now?: () => number;
  clockToleranceMs?: number;
  /** Refuse `sequence < minSequence` (`trust_bundle_rollback`); equal is the same bundle again. */
  minSequence?: number;
  /** The root chain (PROTOCOL.md §11): the bundle must then be signed by a `bundleKeys` key of the newest version. */
  rootChain?: unknown[];
  /** The highest root version accepted before: a chain ending below it is `root_rollback`. */
  minRootVersion?: number;
  /**
   * The root chain accepted before (persisted by the caller): `rootChain` must extend it statement
   * for statement, else `root_rotation_invalid`. A chain that arrived with the bundle is never
   * trusted as accepted: a fork signed by a retired root key that has leaked would pass.
   */
  acceptedRootChain?: unknown[];
}

/**
 * Checks a bundle against the pinned root key, in this order: shape → root chain, when given
 * (`root_rotation_invalid`, `root_rollback`) → signature by the root, or by a bundle key of the
 * newest root version (`trust_bundle_invalid`) → expiry (`trust_bundle_expired`, fail closed) →
 * `issuedAt` (`not_yet_valid`) → rollback (`trust_bundle_rollback`). Never throws.
 */
export async function verifyBundleWith(
  c: CtlCrypto,
  input: unknown,
  rootPublicKey: PublicKeyInput,
  options: VerifyBundleOptions = {},
): Promise<Verified<{ bundle: TrustBundle; rootVersion: number }>> {
  try {
    const bundle = artifactData(input, MAX_BUNDLE_MEMBERS);
    checkBundle(bundle);
    const o = options ?? {};
    // Time is a number or nothing (PROTOCOL.md §12): checked before anything else is trusted.
    const now = readClock(o.now ?? hostNow, 'options.now');
    const tol = timeOption(o.clockToleranceMs, 'options.clockToleranceMs', 0);
    const signers = await bundleSignersWith(c, rootPublicKey, o.rootChain, o.minRootVersion, o.acceptedRootChain);
    if (!(await signedByBundleKey(c, bundle, signers))) {
      fail(
        'trust_bundle_invalid',
        signers.rootVersion > 1
          ? `the bundle is not signed by a bundle key of root version ${signers.rootVersion}`
          : 'the bundle is not signed by the pinned root key',
      );
    }
    checkWindow(bundle, 'bundle', 'bundle', 'trust_bundle_expired', now, tol);
    if (o.minSequence !== undefined && bundle.sequence < o.minSequence) {
      fail('trust_bundle_rollback', `bundle sequence ${bundle.sequence} is older than ${o.minSequence}`);
    }
    return { valid: true, bundle, rootVersion: signers.rootVersion };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}
