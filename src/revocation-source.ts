/**
 * Revocation from a source the host supplies (spec §4.3 "revocation tokens on a ledger";
 * PROTOCOL.md §5 step 3), beside the grant's revocation URL and the bundles' lists: the verifier
 * asks the host's `revocationSource` about each id of the chain (root grant first, then every
 * delegation link), caches the answers for `revocationTtl` (a revocation for good), and fails
 * closed (`revocation_unavailable`) when the source cannot answer. The SDK does no I/O here:
 * the host reads its chain (service-kit/chain/revocation-source.ts does it over JSON-RPC); the
 * SDK gives the token id and the `eth_call` data of `CtlRevocationTokens.isRevoked(bytes32)`.
 */
import type { Delegation, PolicyGrant } from './artifacts/types.js';
import { canonicalize } from './encoding/jcs.js';
import { utf8Encode } from './encoding/utf8.js';
import { sha256HexSync } from './crypto/index.js';
import { fail } from './errors.js';
import { remember } from './crypto/cache.js';
import type { RevocationStatus } from './revocation.js';

/** One id the verifier asks about. */
export interface RevocationQuery {
  /** `grant`: the root grant; `delegation`: a link of its chain (PROTOCOL.md §14). */
  kind: 'grant' | 'delegation';
  /** What the authority's URL is asked: the grant id, or the link's revocation id. */
  id: string;
  /** The id of its revocation token: the grant's hash, or the link's revocation id (64 lowercase hex). */
  tokenId: string;
  /** The root grant (issuer, revocationUrl). */
  grant: PolicyGrant;
}

/** The host's answer for one id; throwing (or answering anything else) is `revocation_unavailable`. */
export type RevocationSource = (query: RevocationQuery) => Promise<RevocationStatus> | RevocationStatus;

/**
 * The id of an artifact's revocation token: hex SHA-256 of JCS of the artifact without its
 * signature (for a link, its `linkRevocationId`; for a grant, "the grant's hash"). It covers every
 * signed member, so a token names one grant, never a grant id another issuer could reuse.
 * @example revocationTokenId(grant) // '9c1e…' (64 hex)
 */
export function revocationTokenId(artifact: PolicyGrant | Delegation): string {
  const { signature: _s, ...signed } = artifact as PolicyGrant & { signature?: string };
  return sha256HexSync(utf8Encode(canonicalize(signed)));
}

/** The 4-byte selector of `isRevoked(bytes32)` (keccak-256 of the signature; a test recomputes it). */
export const IS_REVOKED_SELECTOR = '0x4294857f';

/**
 * The `data` of an `eth_call` to CtlRevocationTokens asking whether `tokenId` is revoked.
 * @example await rpc('eth_call', [{ to: contract, data: revocationTokenCallData(id) }, 'latest'])
 */
export function revocationTokenCallData(tokenId: string): string {
  if (typeof tokenId !== 'string' || !/^[0-9a-f]{64}$/.test(tokenId))
    throw new TypeError('tokenId: 64 lowercase hex (revocationTokenId)');
  return `${IS_REVOKED_SELECTOR}${tokenId}`;
}

/**
 * The answer of that `eth_call`: an ABI-encoded bool (one 32-byte word, 0 or 1). Anything else
 * (an empty answer from an address without the contract, a revert) is `revocation_unavailable`.
 */
export function parseRevocationTokenResult(result: unknown): boolean {
  if (typeof result === 'string' && /^0x0{63}[01]$/.test(result)) return result.endsWith('1');
  return fail('revocation_unavailable', 'the revocation contract did not answer a bool (wrong address or chain?)');
}

interface Entry {
  at: number;
  status: RevocationStatus;
}

/** The verifier's cache in front of a host's source: TTL, revoked for good, one question per id at a time. */
export function createSourceChecker(maxEntries = 4096) {
  const cache = new Map<string, Entry>();
  const inflight = new Map<string, Promise<RevocationStatus>>();
  return async (
    source: RevocationSource,
    q: RevocationQuery,
    ttlMs: number,
    now: number,
  ): Promise<RevocationStatus> => {
    const key = q.tokenId;
    const hit = cache.get(key);
    if (hit && (hit.status.revoked || now - hit.at < ttlMs)) return hit.status;
    let p = inflight.get(key);
    if (!p) {
      p = (async () => {
        let answer: unknown;
        try {
          answer = await source(q);
        } catch (e) {
          fail('revocation_unavailable', `the revocation source did not answer (${(e as Error)?.message ?? e})`);
        }
        const a = answer as RevocationStatus | null;
        if (typeof a !== 'object' || a === null || typeof a.revoked !== 'boolean')
          fail('revocation_unavailable', 'the revocation source answered something other than { revoked }');
        const status: RevocationStatus = { revoked: a.revoked };
        if (typeof a.revokedAt === 'string') status.revokedAt = a.revokedAt;
        remember(cache, key, { at: now, status }, maxEntries);
        return status;
      })().finally(() => inflight.delete(key));
      inflight.set(key, p);
    }
    return p;
  };
}
