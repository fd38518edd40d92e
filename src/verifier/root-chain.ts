/**
 * Walking a root chain (PROTOCOL.md §11, TUF-style): from the pinned version-1 root, one
 * `ctl-root/1` statement at a time, each accepted only when a threshold of the previous version's
 * keys and a threshold of its own keys signed it. What comes out is the root version reached and
 * the keys allowed to sign Trust Bundles at that version, and nothing else: a bundle signed by a
 * key of an older version is refused by the caller (`trust_bundle_invalid`).
 *
 * Every statement is checked as a canonical copy (parsed back from its JCS bytes), so what the
 * signatures covered is exactly what the result is made of, whatever the caller does to its own
 * objects afterwards (PROTOCOL.md §12).
 */
import type { CtlCrypto, PublicJwk, PublicKeyInput } from '../crypto/types.js';
import type { RootKey, RootStatement, TrustBundle } from '../artifacts/types.js';
import { checkRootStatement, coreOf, rootSignedBytes } from '../artifacts/root.js';
import { verifyArtifactSignature } from '../artifacts/signing.js';
import { passUnsupported } from '../crypto/algorithm-support.js';
import { toErrorInfo, type CtlErrorInfo, malformed, fail } from '../errors.js';
import { canonicalize, parseStrictJson } from '../encoding/jcs.js';
import { base64urlDecode } from '../encoding/base64url.js';

/** Longest chain walked: a root rotated every month for 80 years. */
export const MAX_ROOT_CHAIN = 1024;

export interface VerifyRootChainOptions {
  /** The highest root version this verifier accepted before (persisted): a chain ending below it is `root_rollback`. */
  minVersion?: number;
  /**
   * The chain this verifier accepted before (persisted): the new chain must repeat it statement for
   * statement (canonical bytes) before adding any, else `root_rotation_invalid`. Walking from the
   * pin alone would accept a fork signed by a root key retired long ago that has leaked since.
   * Implies `minVersion` = its length + 1 when that is higher.
   */
  accepted?: unknown;
}

export type RootChainResult =
  | {
      valid: true;
      /** The version the chain reaches (1: the pinned root, no statement). */
      rootVersion: number;
      /**
       * The keys allowed to sign Trust Bundles at `rootVersion` (version 1: the pinned root, with its thumbprint as
       * kid).
       */
      bundleKeys: RootKey[];
      /** The root set at `rootVersion` and its threshold: what must sign the next statement. */
      rootKeys: RootKey[];
      threshold: number;
    }
  | { valid: false; error: CtlErrorInfo };

interface RootSet {
  version: number;
  keys: RootKey[];
  threshold: number;
  bundleKeys: RootKey[];
}

/** How many distinct keys of `keys` have a valid signature in `signatures` (matched by kid). */
async function signedBy(
  c: CtlCrypto,
  keys: RootKey[],
  signatures: RootStatement['signatures'],
  bytes: Uint8Array,
): Promise<number> {
  let n = 0;
  for (const k of keys) {
    const s = signatures.find((x) => x.keyId === k.kid);
    if (!s) continue;
    try {
      if (await c.verifyWithJwk(coreOf(k), bytes, base64urlDecode(s.signature))) n++;
    } catch (e) {
      passUnsupported(e); // a key algorithm this build has no backend for is said as such (PROTOCOL.md §9)
      // a bad signature or key: it does not count
    }
  }
  return n;
}

/**
 * The pinned root as version 1 of the chain. Throws `malformed` for a key that is not one. @example (await
 * pinnedRootSet(crypto, pem)).keys[0].kid
 */
export async function pinnedRootSet(c: CtlCrypto, pinned: PublicKeyInput): Promise<RootSet> {
  let jwk: PublicJwk;
  try {
    jwk = await c.toPublicJwk(pinned);
  } catch {
    malformed('rootPublicKeyPem is not a usable public key');
  }
  const core = coreOf(jwk as RootKey);
  const key: RootKey = { ...core, kid: await c.jwkThumbprint(core), alg: core.kty === 'OKP' ? 'EdDSA' : 'ES256' };
  return { version: 1, keys: [key], threshold: 1, bundleKeys: [key] };
}

/**
 * Walks `statements` from the pinned root (PROTOCOL.md §11). Never throws.
 * @example const r = await verifyRootChainWith(crypto, pinnedRootPem, statements, { minVersion: storedVersion })
 */
export async function verifyRootChainWith(
  c: CtlCrypto,
  pinnedRoot: PublicKeyInput,
  statements: unknown,
  options: VerifyRootChainOptions = {},
): Promise<RootChainResult> {
  try {
    const minVersion = options?.minVersion;
    if (minVersion !== undefined && (!Number.isSafeInteger(minVersion) || minVersion < 1)) {
      malformed('minVersion must be a safe integer ≥ 1');
    }
    const list = typeof statements === 'string' ? parseStrictJson(statements) : statements;
    if (!Array.isArray(list)) malformed('the root chain must be an array of ctl-root/1 statements');
    if (list.length > MAX_ROOT_CHAIN) malformed(`the root chain has more than ${MAX_ROOT_CHAIN} statements`);
    let current = await pinnedRootSet(c, pinnedRoot);
    /** The canonical text of each statement walked (compared with `accepted`). */
    const walkedText: string[] = [];
    for (let i = 0; i < list.length; i++) {
      const item = list[i];
      // The canonical copy: the bytes signed are the bytes used.
      let statement: RootStatement;
      try {
        const text = canonicalize(typeof item === 'string' ? parseStrictJson(item) : item);
        const copy = parseStrictJson(text);
        checkRootStatement(copy);
        walkedText.push(text);
        statement = copy;
      } catch (e) {
        const info = toErrorInfo(e);
        fail(info.code === 'unsupported_version' ? info.code : 'malformed', `root chain [${i}]: ${info.message}`);
      }
      const want = current.version + 1;
      if (statement.rootVersion !== want) {
        fail('root_rotation_invalid', `root chain [${i}] is version ${statement.rootVersion}, expected ${want}`);
      }
      const bytes = rootSignedBytes(statement as unknown as Record<string, unknown>);
      const byOld = await signedBy(c, current.keys, statement.signatures, bytes);
      if (byOld < current.threshold) {
        fail(
          'root_rotation_invalid',
          `root version ${want} is signed by ${byOld} of version ${current.version}'s keys, ` +
            `threshold ${current.threshold}`,
        );
      }
      const byNew = await signedBy(c, statement.keys, statement.signatures, bytes);
      if (byNew < statement.threshold) {
        fail(
          'root_rotation_invalid',
          `root version ${want} is signed by ${byNew} of its own keys, threshold ${statement.threshold}`,
        );
      }
      current = {
        version: want,
        keys: statement.keys,
        threshold: statement.threshold,
        bundleKeys: statement.bundleKeys,
      };
    }
    const acceptedList =
      options?.accepted === undefined
        ? undefined
        : typeof options.accepted === 'string'
          ? parseStrictJson(options.accepted)
          : options.accepted;
    if (acceptedList !== undefined && !Array.isArray(acceptedList))
      malformed('options.accepted must be an array of statements');
    const floor = Math.max(minVersion ?? 1, acceptedList ? acceptedList.length + 1 : 1);
    if (current.version < floor) {
      fail(
        'root_rollback',
        `the root chain ends at version ${current.version}, below version ${floor} already accepted`,
      );
    }
    for (let i = 0; i < (acceptedList?.length ?? 0); i++) {
      let same = false;
      try {
        const a = acceptedList![i];
        same = walkedText[i] === canonicalize(typeof a === 'string' ? parseStrictJson(a) : a);
      } catch {
        /* an unreadable accepted statement matches nothing */
      }
      if (!same)
        fail('root_rotation_invalid', `root chain [${i}] differs from root version ${i + 2} accepted before (a fork)`);
    }
    return {
      valid: true,
      rootVersion: current.version,
      bundleKeys: current.bundleKeys,
      rootKeys: current.keys,
      threshold: current.threshold,
    };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}

/** The keys that may sign Trust Bundles, and their identity as bytes (never an object's identity). */
export interface BundleSigners {
  /** Canonical JSON of `keys`: two sets are the same exactly when their ids are equal. */
  readonly id: string;
  /**
   * `kid` absent: the pinned version-1 root, which signs whatever `keyId` the bundle names (as before rotation
   * existed).
   */
  readonly keys: ReadonlyArray<{ jwk: PublicJwk; kid?: string }>;
  /** The root version these keys belong to. */
  readonly rootVersion: number;
}

/**
 * The bundle signers for a pinned root and an optional chain: without a chain (or with an empty
 * one) the pinned root itself; with one, the `bundleKeys` of the newest version it reaches, the
 * chain extending `accepted` (the chain the caller accepted before) when given.
 * Throws `CtlError` (the chain's code, or `malformed` for an unusable root).
 * @example const signers = await bundleSignersWith(crypto, rootPem, statements, storedVersion, storedStatements)
 */
export async function bundleSignersWith(
  c: CtlCrypto,
  pinnedRoot: PublicKeyInput,
  rootChain?: unknown,
  minVersion?: number,
  accepted?: unknown,
): Promise<BundleSigners> {
  if (rootChain === undefined) {
    if (minVersion !== undefined && minVersion > 1)
      fail('root_rollback', `no root chain given, but root version ${minVersion} was accepted before`);
    if (Array.isArray(accepted) && accepted.length > 0)
      fail('root_rollback', `no root chain given, but root version ${accepted.length + 1} was accepted before`);
    const root = await pinnedRootSet(c, pinnedRoot);
    const keys = [{ jwk: coreOf(root.keys[0]!) }];
    return { id: canonicalize({ v: 1, keys }), keys, rootVersion: 1 };
  }
  const r = await verifyRootChainWith(c, pinnedRoot, rootChain, { minVersion, accepted });
  if (!r.valid) fail(r.error.code, r.error.message);
  const keys =
    r.rootVersion === 1
      ? [{ jwk: coreOf(r.bundleKeys[0]!) }]
      : r.bundleKeys.map((k) => ({ jwk: coreOf(k), kid: k.kid }));
  return { id: canonicalize({ v: r.rootVersion, keys }), keys, rootVersion: r.rootVersion };
}

/**
 * Whether `bundle` is signed by one of `signers`: the key its `keyId` names among a rotated root's
 * `bundleKeys`, or the pinned version-1 root. Never throws.
 * @example if (!(await signedByBundleKey(crypto, bundle, signers))) refuse('trust_bundle_invalid')
 */
export async function signedByBundleKey(c: CtlCrypto, bundle: TrustBundle, signers: BundleSigners): Promise<boolean> {
  for (const k of signers.keys) {
    if (k.kid !== undefined && k.kid !== bundle.keyId) continue;
    if (await verifyArtifactSignature(c, 'bundle', bundle as unknown as Record<string, unknown>, k.jwk)) return true;
  }
  return false;
}
