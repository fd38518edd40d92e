/**
 * What a wallet session is opened with (spec §2.8), checked once when it opens: the grant (or a
 * chain's leaf delegation, PROTOCOL.md §14), the session's ceiling inside it, where spend is kept
 * and the time options. Every payment of the session then reads these, never the raw options.
 */
import type { Delegation, PolicyGrant } from '../artifacts/types.js';
import { chainOf, checkGrantOrDelegation, effectiveGrant, type DelegationChain } from '../artifacts/delegation.js';
import { chainScope } from '../artifacts/link-revocation.js';
import { DEFAULT_SBA_TTL_MS } from '../artifacts/sba.js';
import type { CtlCrypto } from '../crypto/types.js';
import { frozenJsonCopy } from '../encoding/frozen-copy.js';
import { parseStrictJson } from '../encoding/jcs.js';
import { CtlError } from '../errors.js';
import { hostFetch, hostNow } from '../host.js';
import { newId } from '../ids.js';
import type { FetchLike } from '../net/fetch-json.js';
import type { RevocationStatus } from '../revocation.js';
import { isIdentifier, parseAmount, parseCurrency, parseTimestamp, timeOption } from '../values.js';
import { bundleRevocation } from './bundle-revocation.js';
import type { SessionOptions } from './session.js';
import { createMemorySpendStorage, type SpendStorage } from './spend-storage.js';

export interface SessionSettings<G extends PolicyGrant | Delegation> {
  /** The session's own frozen copy of the grant: every SBA embeds it and signs its canonical text. */
  drawn: G;
  /** What `drawn` allows as one grant: under a delegation, the leaf's narrowed view (PROTOCOL.md §14). */
  grant: PolicyGrant;
  chain: DelegationChain;
  root: PolicyGrant;
  sessionId: string;
  /** The session's own bound, at most the grant's `maxAmountMinor`. */
  ceiling: bigint;
  storage: SpendStorage;
  /** The grant's total, shared by every session of the grant on `storage` (PROTOCOL.md §12). */
  grantKey: string;
  /** This session's total, bounded by `ceiling`. */
  sessionKey: string;
  now: () => number;
  fetchFn: FetchLike | undefined;
  /** Milliseconds a revocation answer is cached. */
  ttl: number;
  revocationTimeoutMs: number;
  sbaTtlMs: number;
  grantExpiry: number;
  /** Offline revocation from installed Trust Bundles, in place of the grant's `revocationUrl`. */
  fromBundles: ((grantId: string, now: number) => Promise<RevocationStatus>) | undefined;
  /** The id space of this chain's SBAs (PROTOCOL.md §7). */
  scope: string;
}

/** Reads and checks `createSession`'s arguments. Throws TypeError, RangeError or CtlError. */
export function sessionSettings<G extends PolicyGrant | Delegation>(
  c: CtlCrypto,
  grantInput: G | string,
  options: SessionOptions,
): SessionSettings<G> {
  const given = (typeof grantInput === 'string' ? parseStrictJson(grantInput) : grantInput) as G;
  checkGrantOrDelegation(given, 'grant');
  // The session's own frozen copy: every SBA embeds it and signs its canonical text, taken once.
  const drawn = frozenJsonCopy(given);
  // Under a delegation, what the leaf allows as one grant; the chain's links are charged too (PROTOCOL.md §14).
  const grant = effectiveGrant(drawn);
  const chain = chainOf(drawn);
  const root = chain.root;
  if (!options || typeof options !== 'object') throw new TypeError('createSession: options are required');
  if (typeof options.actorId !== 'string' || options.actorId.length === 0)
    throw new TypeError('createSession: options.actorId is required');
  if (!options.signingKey) throw new TypeError('createSession: options.signingKey is required');
  const sessionId = options.sessionId ?? newId('sess_');
  if (!isIdentifier(sessionId)) throw new TypeError('createSession: options.sessionId must be an identifier');
  const grantMax = BigInt(grant.maxAmountMinor);
  let ceiling = grantMax;
  if (options.ceiling) {
    ceiling = parseAmount(options.ceiling.amount, 'ceiling.amount');
    if (parseCurrency(options.ceiling.currency, 'ceiling.currency') !== grant.currency) {
      throw new CtlError(
        'currency_mismatch',
        `createSession: ceiling currency ${options.ceiling.currency} differs from the grant's ${grant.currency}`,
      );
    }
    if (ceiling > grantMax) throw new RangeError('createSession: ceiling exceeds the grant maxAmountMinor');
  }
  const storage = options.spendStorage ?? createMemorySpendStorage();
  // The grant's total is shared by every session of the grant on this storage (PROTOCOL.md §12);
  // the session's total bounds it by its own ceiling.
  const grantKey = `wallet:${root.grantId}`;
  const sessionKey = `${grant.grantId}/${sessionId}`;
  const now = options.now ?? hostNow;
  const fetchFn = options.fetch ?? (hostFetch() as FetchLike | undefined);
  // Time is a number or nothing (PROTOCOL.md §12): each time option checked once, here.
  const ttl = timeOption(options.revocationTtl, 'options.revocationTtl', 30_000);
  const revocationTimeoutMs = timeOption(options.revocationTimeoutMs, 'options.revocationTimeoutMs', 3000);
  const sbaTtlMs = timeOption(options.sbaTtlMs, 'options.sbaTtlMs', DEFAULT_SBA_TTL_MS);
  const grantExpiry = parseTimestamp(grant.expiresAt, 'grant.expiresAt');
  const fromBundles = options.revocationFromBundles ? bundleRevocation(c, options.revocationFromBundles) : undefined;
  // An SBA's id within the chain it is signed under (PROTOCOL.md §7): the grant's, never the
  // session's, so a session opened after a restart settles the holds of the one before.
  const scope = chainScope(chain, 'wallet:');
  return {
    drawn,
    grant,
    chain,
    root,
    sessionId,
    ceiling,
    storage,
    grantKey,
    sessionKey,
    now,
    fetchFn,
    ttl,
    revocationTimeoutMs,
    sbaTtlMs,
    grantExpiry,
    fromBundles,
    scope,
  };
}
