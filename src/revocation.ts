/**
 * The grant revocation check shared by the wallet and the verifier (spec §3 rule 1, §4.4 step 3):
 * cached for a TTL, concurrent checks of one URL coalesced into one request, fail closed.
 * A "revoked" answer is cached for good: revocation is permanent.
 */
import { fail } from './errors.js';
import { fetchJson, type FetchLike } from './net/fetch-json.js';
import { remember } from './crypto/cache.js';

export interface RevocationStatus {
  revoked: boolean;
  revokedAt?: string;
}

interface Entry {
  at: number;
  status: RevocationStatus;
}

export interface RevocationChecker {
  /** Throws `CtlError('revocation_unavailable')` when the answer cannot be had. */
  check(
    url: string,
    grantId: string,
    opts: { ttlMs: number; now: number; fetch: FetchLike | undefined; timeoutMs?: number },
  ): Promise<RevocationStatus>;
  /** Marks a grant revoked locally (e.g. from a Trust Bundle), so later checks need no request. */
  markRevoked(url: string): void;
}

/**
 * @example const rc = createRevocationChecker(); await rc.check(grant.revocationUrl, grant.grantId, { ttlMs: 60000,
 * now: Date.now(), fetch })
 */
export function createRevocationChecker(maxEntries = 4096): RevocationChecker {
  const cache = new Map<string, Entry>();
  const inflight = new Map<string, Promise<RevocationStatus>>();

  async function fetchStatus(
    url: string,
    grantId: string,
    fetchFn: FetchLike | undefined,
    timeoutMs: number,
    now: number,
  ) {
    const body = await fetchJson(fetchFn, url, { timeoutMs });
    const b = body as Record<string, unknown>;
    if (typeof b !== 'object' || b === null || b['grantId'] !== grantId || typeof b['revoked'] !== 'boolean') {
      fail('revocation_unavailable', `${url} did not answer { grantId, revoked } for this grant`);
    }
    const status: RevocationStatus = { revoked: b['revoked'] };
    if (typeof b['revokedAt'] === 'string') status.revokedAt = b['revokedAt'];
    remember(cache, url, { at: now, status }, maxEntries);
    return status;
  }

  return {
    async check(url, grantId, { ttlMs, now, fetch: fetchFn, timeoutMs = 3000 }) {
      const hit = cache.get(url);
      if (hit && (hit.status.revoked || now - hit.at < ttlMs)) return hit.status;
      let p = inflight.get(url);
      if (!p) {
        p = fetchStatus(url, grantId, fetchFn, timeoutMs, now).finally(() => inflight.delete(url));
        inflight.set(url, p);
      }
      return p;
    },
    markRevoked(url) {
      cache.set(url, { at: 0, status: { revoked: true } });
    },
  };
}
