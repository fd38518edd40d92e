/**
 * Root statement (`ctl-root/1`, PROTOCOL.md §11): the fleet's root set at one version, signed by
 * a threshold of the previous version's keys and of its own. Closed object (§3 rules); the signed
 * bytes are UTF-8("ctl-root/1\n") || JCS(statement without "signatures"), so each signature covers
 * every member but the signature list itself, and a root signature can never pass as a bundle,
 * grant, SBA or receipt signature (different prefix).
 */
import type { Alg, CtlCrypto, PrivateKeyInput, PublicJwk, SigningKey } from '../crypto/types.js';
import type { RootKey, RootStatement } from './types.js';
import {
  arrayOf,
  bad,
  checkShape,
  checkVersion,
  counter,
  identifier,
  isPlainObject,
  object,
  signature,
  thumbprintJwk,
  timestamp,
  version,
  type Shape,
} from './schema.js';
import { canonicalize } from '../encoding/jcs.js';
import { utf8Encode } from '../encoding/utf8.js';
import { base64urlEncode } from '../encoding/base64url.js';
import { formatTimestamp } from '../values.js';
import { hostNow } from '../host.js';
import { CtlError, malformed } from '../errors.js';

/** Most keys in one root set, bundle key set or signature list. */
export const MAX_ROOT_KEYS = 16;

/** A key of a root set: exactly the thumbprint members + `kid` + `alg` (§11: "JWK + kid + alg"). */
const rootKey = (v: unknown, f: string): void => {
  if (!isPlainObject(v)) bad(f, 'must be a JWK object');
  const { kid, alg, ...core } = v;
  thumbprintJwk(core, f);
  identifier(kid, `${f}.kid`);
  if (!(alg === 'EdDSA' && core['kty'] === 'OKP') && !(alg === 'ES256' && core['kty'] === 'EC')) {
    bad(`${f}.alg`, 'must be "EdDSA" for OKP keys or "ES256" for EC keys');
  }
};

/** A key set: 1..16 keys, kids and key material both distinct (a key counts once towards a threshold). */
const keySet = (v: unknown, f: string): void => {
  arrayOf(rootKey, { min: 1, max: MAX_ROOT_KEYS })(v, f);
  const keys = v as RootKey[];
  if (new Set(keys.map((k) => k.kid)).size !== keys.length) bad(f, 'kids must be distinct');
  if (new Set(keys.map((k) => canonicalize(coreOf(k)))).size !== keys.length) bad(f, 'keys must be distinct');
};

const signatureEntry = object({ keyId: [true, identifier], signature: [true, signature] });

const statementShape: Shape = {
  version: [true, version],
  rootVersion: [true, counter],
  keys: [true, keySet],
  threshold: [true, counter],
  bundleKeys: [true, keySet],
  issuedAt: [true, timestamp],
  signatures: [true, arrayOf(signatureEntry, { min: 1, max: 2 * MAX_ROOT_KEYS })],
};

/**
 * The thumbprint members of a root or bundle key: what the crypto layer imports. @example
 * coreOf(statement.bundleKeys[0])
 */
export function coreOf(k: RootKey): PublicJwk {
  return k.kty === 'EC' ? { kty: k.kty, crv: k.crv, x: k.x, y: k.y } : { kty: k.kty, crv: k.crv, x: k.x };
}

/**
 * Structure and value rules of a statement; throws `CtlError` (`malformed`, `unsupported_version`). @example
 * checkRootStatement(JSON.parse(text))
 */
export function checkRootStatement(value: unknown): asserts value is RootStatement {
  checkVersion(value, 'root');
  checkShape(value, 'root', statementShape);
  // Version 1 is the pinned key itself: statements start at 2.
  if ((value['rootVersion'] as number) < 2)
    bad('root.rootVersion', 'must be at least 2 (version 1 is the pinned root key)');
  const t = value['threshold'] as number;
  if (t < 1 || t > (value['keys'] as unknown[]).length)
    bad('root.threshold', 'must be between 1 and the number of keys');
  const ids = (value['signatures'] as Array<{ keyId: string }>).map((s) => s.keyId);
  if (new Set(ids).size !== ids.length) bad('root.signatures', 'one signature per keyId');
}

/** The exact bytes every signature of a statement covers. @example rootSignedBytes(statement) */
export function rootSignedBytes(statement: Record<string, unknown>): Uint8Array {
  const { signatures: _omit, ...rest } = statement;
  return utf8Encode('ctl-root/1\n' + canonicalize(rest));
}

export interface RootStatementFields {
  /** The version this statement makes current: the previous one + 1 (≥ 2). */
  rootVersion: number;
  /** The new root set, with its kids (default kid: the RFC 7638 thumbprint). */
  keys: Array<PublicJwk & { kid?: string }>;
  threshold: number;
  /** The keys that sign Trust Bundles from this version on. */
  bundleKeys: Array<PublicJwk & { kid?: string }>;
  issuedAt?: string;
}

export interface SignRootOptions {
  /**
   * Every key that signs: a threshold of the previous version's keys and a threshold of the new
   * `keys` (a key in both counts for both). Each `SigningKey` may live in an HSM. `keyId` defaults
   * to the key's thumbprint, which is also the kid of the pinned version-1 root.
   */
  signers: Array<{ key: PrivateKeyInput | SigningKey; keyId?: string }>;
  now?: () => number;
}

async function withKid(c: CtlCrypto, k: PublicJwk & { kid?: string }, f: string): Promise<RootKey> {
  const core = { kty: k.kty, crv: k.crv, x: k.x, ...(k.kty === 'EC' ? { y: k.y } : {}) } as PublicJwk;
  thumbprintJwk(core, f);
  const alg: Alg = core.kty === 'OKP' ? 'EdDSA' : 'ES256';
  return { ...core, kid: k.kid ?? (await c.jwkThumbprint(core)), alg };
}

/**
 * Builds and signs a root statement. It does not check that the signers reach the thresholds:
 * `verifyRootChain` does, on the chain the statement is appended to.
 * @example await createRootStatementWith(crypto, { rootVersion: 2, keys: [k2.publicJwk], threshold: 1, bundleKeys:
 * [bk.publicJwk] }, { signers: [{ key: rootPem }, { key: k2Pem }] })
 */
export async function createRootStatementWith(
  c: CtlCrypto,
  fields: RootStatementFields,
  options: SignRootOptions,
): Promise<RootStatement> {
  if (!fields || !options || !Array.isArray(options.signers) || options.signers.length === 0) {
    throw new TypeError('createRootStatement: options.signers must name at least one key');
  }
  if (!Array.isArray(fields.keys) || !Array.isArray(fields.bundleKeys))
    throw new TypeError('createRootStatement: keys and bundleKeys are arrays');
  const unsigned: Record<string, unknown> = {
    version: 1,
    rootVersion: fields.rootVersion,
    keys: await Promise.all(fields.keys.map((k, i) => withKid(c, k, `keys[${i}]`))),
    threshold: fields.threshold,
    bundleKeys: await Promise.all(fields.bundleKeys.map((k, i) => withKid(c, k, `bundleKeys[${i}]`))),
    issuedAt: fields.issuedAt ?? formatTimestamp((options.now ?? hostNow)()),
  };
  const bytes = rootSignedBytes(unsigned);
  const signatures: Array<{ keyId: string; signature: string }> = [];
  for (const s of options.signers) {
    const key = await c.importSigningKey(s.key);
    const keyId = s.keyId ?? (await c.jwkThumbprint(key.publicJwk));
    if (signatures.some((x) => x.keyId === keyId)) malformed(`createRootStatement: key ${keyId} given twice`);
    signatures.push({ keyId, signature: base64urlEncode(await key.sign(bytes)) });
  }
  const statement = { ...unsigned, signatures };
  checkRootStatement(statement);
  return statement as unknown as RootStatement;
}
