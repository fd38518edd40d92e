/**
 * A human's revocation (`ctl-revocation/1`, PROTOCOL.md §10): `{ version: 1, grantId, issuer,
 * keyId, issuedAt }` signed by the did:key that issued the grant, so the person can revoke
 * without an API key. The authority refuses one older than its freshness window, and revoking is
 * idempotent, so a replayed revocation can only repeat what already happened.
 */
import type { CtlCrypto, PrivateKeyInput, SigningKey } from '../crypto/types.js';
import type { SignedRevocation, Verified } from './types.js';
import {
  bad,
  checkShape,
  checkVersion,
  identifier,
  issuer,
  keyIdentifier,
  signature,
  timestamp,
  version,
  type Shape,
} from './schema.js';
import { signArtifact, verifyArtifactSignature } from './signing.js';
import { didKeyFromJwk, didKeyToJwk, didKeyUrl, isDidKey } from '../encoding/did-key.js';
import { toErrorInfo, fail } from '../errors.js';
import { artifactData } from '../encoding/frozen-copy.js';
import { formatTimestamp, parseTimestamp, readClock, timeOption } from '../values.js';
import { hostNow } from '../host.js';

const revocationShape: Shape = {
  version: [true, version],
  grantId: [true, identifier],
  issuer: [true, issuer],
  keyId: [true, keyIdentifier],
  issuedAt: [true, timestamp],
  signature: [true, signature],
};

/** Structure and value rules; throws `CtlError('malformed' | 'unsupported_version')`. */
export function checkRevocation(value: unknown): asserts value is SignedRevocation {
  checkVersion(value, 'revocation');
  checkShape(value, 'revocation', revocationShape);
  if (!isDidKey(value['issuer'])) bad('revocation.issuer', 'must be a did:key');
  if (value['keyId'] !== didKeyUrl(value['issuer'] as string))
    bad('revocation.keyId', 'must be the did:key URL of the issuer');
}

export async function createRevocationWith(
  c: CtlCrypto,
  fields: { grantId: string; issuedAt?: string },
  options: { signingKey: PrivateKeyInput | SigningKey; now?: () => number },
): Promise<SignedRevocation> {
  if (!fields || typeof fields !== 'object') throw new TypeError('createSignedRevocation: fields must be an object');
  if (!options?.signingKey) throw new TypeError('createSignedRevocation: options.signingKey is required');
  const signer = await c.importSigningKey(options.signingKey);
  const did = didKeyFromJwk(signer.publicJwk);
  const unsigned = {
    version: 1,
    grantId: fields.grantId,
    issuer: did,
    keyId: didKeyUrl(did),
    issuedAt: fields.issuedAt ?? formatTimestamp((options.now ?? hostNow)()),
  };
  checkRevocation({ ...unsigned, signature: 'A'.repeat(86) });
  return (await signArtifact(c, 'revocation', unsigned, signer)) as unknown as SignedRevocation;
}

export interface VerifyRevocationOptions {
  /** Oldest `issuedAt` accepted, ms before now (default 300 000: five minutes). */
  maxAgeMs?: number;
  now?: () => number;
  clockToleranceMs?: number;
}

/**
 * Shape, the DID's signature (`unauthorized` when it does not verify), freshness (`unauthorized`
 * when older than `maxAgeMs`, `not_yet_valid` when in the future). Never throws.
 */
export async function verifyRevocationWith(
  c: CtlCrypto,
  input: unknown,
  options: VerifyRevocationOptions = {},
): Promise<Verified<{ revocation: SignedRevocation }>> {
  try {
    const r = artifactData(input);
    checkRevocation(r);
    const key = didKeyToJwk(r.issuer);
    if (!(await verifyArtifactSignature(c, 'revocation', r as unknown as Record<string, unknown>, key))) {
      fail('unauthorized', 'the revocation is not signed by its issuer DID');
    }
    const now = readClock(options?.now ?? hostNow, 'options.now');
    const tol = timeOption(options?.clockToleranceMs, 'options.clockToleranceMs', 0);
    const maxAgeMs = timeOption(options?.maxAgeMs, 'options.maxAgeMs', 300_000);
    const at = parseTimestamp(r.issuedAt, 'revocation.issuedAt');
    if (at > now + tol) fail('not_yet_valid', 'the revocation is issued in the future');
    if (now - at > maxAgeMs + tol) fail('unauthorized', 'the revocation is too old: sign a fresh one');
    return { valid: true, revocation: r };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}
