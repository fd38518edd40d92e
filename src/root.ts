/**
 * Root rotation (PROTOCOL.md §11), bound to the default crypto facade: sign the next `ctl-root/1`
 * statement, and walk a chain of them from the pinned root.
 */
import { defaultCrypto } from './crypto/index.js';
import { createRootStatementWith, type RootStatementFields, type SignRootOptions } from './artifacts/root.js';
import { verifyRootChainWith, type RootChainResult, type VerifyRootChainOptions } from './verifier/root-chain.js';
import type { PublicKeyInput } from './crypto/types.js';
import type { RootStatement } from './artifacts/types.js';

/**
 * Walks a root chain from the pinned version-1 root, one version at a time (PROTOCOL.md §11):
 * statement n+1 must carry `rootVersion` n+1 and signatures of at least `threshold(n)` distinct
 * keys of version n and of its own `threshold` of its own `keys`. Gives the version reached and
 * its `bundleKeys` (the only keys whose Trust Bundles are accepted from then on), or
 * `root_rotation_invalid` (bad signature, threshold not met, version skipped) or `root_rollback`
 * (the chain ends below `minVersion`, the version this verifier stored). Never throws.
 *
 * Pass the same `statements` as `rootChain` to `verifyTrustBundle` / `verifyCtl`, and store
 * `rootVersion` (only ever raised) to refuse an older chain after a reboot; store the chain itself
 * and pass it as `accepted` to refuse a fork signed by a retired root key that leaked later.
 * @example
 * const r = await verifyRootChain(pinnedRootPem, statements, { minVersion: stored.rootVersion, accepted:
 * stored.statements }) if (!r.valid) refuse(r.error.code) // 'root_rotation_invalid' | 'root_rollback' | 'malformed'
 * else { stored.rootVersion = r.rootVersion; console.log(r.bundleKeys.map((k) => k.kid)) }
 */
export function verifyRootChain(
  pinnedRootPem: PublicKeyInput,
  statements: unknown,
  options?: VerifyRootChainOptions,
): Promise<RootChainResult> {
  return verifyRootChainWith(defaultCrypto, pinnedRootPem, statements, options);
}

/**
 * Signs the next root statement (`ctl-root/1`) with every key in `options.signers`: at least the
 * threshold of the current root version's keys and the threshold of the new `keys` (a key in
 * both signs once and counts for both). Keys may be `SigningKey`s held in an HSM. Whether the
 * thresholds are met is checked by `verifyRootChain` on the chain it is appended to.
 * @example
 * const next = await createRootStatement(
 *   { rootVersion: 2, keys: [a.publicJwk, b.publicJwk, c.publicJwk], threshold: 2, bundleKeys: [bundleKey.publicJwk] },
 *   { signers: [{ key: oldRootPem }, { key: aPem }, { key: bPem }] })
 */
export function createRootStatement(fields: RootStatementFields, options: SignRootOptions): Promise<RootStatement> {
  return createRootStatementWith(defaultCrypto, fields, options);
}
